"""The agent reads the cloudml-hypertune file and the model directory a primary replica leaves."""

import json

from trainhub.agent.outputs import list_model_files, parse_hypertune_lines, read_hypertune_file


def hypertune_line(tag, value, step, timestamp=1525851440.5, trial="1"):
    # Exactly what cloudml-hypertune's report_hyperparameter_tuning_metric writes.
    return json.dumps({"timestamp": timestamp, "trial": trial, tag: str(float(value)),
                       "global_step": str(step)}, sort_keys=True)


def test_it_reads_the_reports_in_file_order():
    text = "\n".join([hypertune_line("accuracy", 0.5, 10), hypertune_line("accuracy", 0.75, 20)]) + "\n"
    assert parse_hypertune_lines(text) == [
        {"globalStep": 10, "timestamp": 1525851440.5, "metrics": {"accuracy": 0.5}},
        {"globalStep": 20, "timestamp": 1525851440.5, "metrics": {"accuracy": 0.75}},
    ]


def test_a_half_written_line_or_a_non_number_is_skipped():
    text = "\n".join([hypertune_line("loss", 1.5, 1), '{"global_step": "2", "loss": "nan"}', '{"glob'])
    assert [r["metrics"] for r in parse_hypertune_lines(text)] == [{"loss": 1.5}]


def test_a_missing_file_means_no_reports(tmp_path):
    assert read_hypertune_file(tmp_path / "hypertune" / "output.metrics") == []


def test_model_files_are_listed_relative_to_the_model_directory(tmp_path):
    (tmp_path / "saved" / "variables").mkdir(parents=True)
    (tmp_path / "saved" / "variables" / "data").write_bytes(b"1234")
    (tmp_path / "model.json").write_text("{}")
    assert list_model_files(tmp_path) == [{"path": "model.json", "sizeBytes": 2},
                                          {"path": "saved/variables/data", "sizeBytes": 4}]
    assert list_model_files(tmp_path / "absent") == []
