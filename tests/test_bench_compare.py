"""bench.compare: two benchmark runs side by side, rows matched by what names their case."""

import json

import pytest

from bench import compare
from bench.report import Column, Section


def run(started: str, rows: list[dict], *, cpu: str = "AMD EPYC", vendor: str = "postgresql", **section_extra) -> dict:
    section = Section(name="plan_pass", title="Pure placement pass", key=("nodes", "jobs"),
                      columns=[Column("nodes", "nodes"), Column("jobs", "jobs"), Column("median_ms", "median ms"),
                               Column("placed", "jobs placed")], rows=rows)
    return {"started_at": started, "mode": "full", "machine": {"cpu_model": cpu, "cpu_cores": 2, "commit": "abc",
                                                               "database": {"vendor": vendor}, "load_average": [0.5]},
            "benchmarks": {"plan_pass": {**section.to_json(), **section_extra}}}


def write(directory, name: str, document: dict):
    path = directory / name
    path.write_text(json.dumps(document))
    return path


def test_rows_are_matched_by_their_case_and_each_figure_shows_its_change(tmp_path):
    before = write(tmp_path, "bench-1.json", run("t1", [
        {"nodes": 100, "jobs": 1000, "median_ms": 10.0, "placed": 40},
        {"nodes": 100, "jobs": 50000, "median_ms": 800.0, "placed": 40}]))
    after = write(tmp_path, "bench-2.json", run("t2", [
        {"nodes": 100, "jobs": 10000, "median_ms": 100.0, "placed": 40},
        {"nodes": 100, "jobs": 1000, "median_ms": 8.0, "placed": 40}], cpu_stolen_share=0.12))
    report = compare.comparison(before, after)
    assert "8.00 -> " not in report and "10.00 -> 8.00 (-20%)" in report and "40 (same)" in report
    assert "only in the earlier run: 100, 50,000" in report and "only in the later run: 100, 10,000" in report
    assert "CPU stolen by the hypervisor: plan_pass 12%" in report
    assert "not like for like" not in report


@pytest.mark.parametrize(("before", "after", "shown"), [
    (None, None, "-"), (None, 3, "- -> 3"), ("yes", "no", "yes -> no"), (0, 2.5, "0 -> 2.50"), (4, 4, "4 (same)"),
])
def test_a_change_reads_plainly_whatever_the_figures(before, after, shown):
    assert compare.change(before, after) == shown


def test_runs_on_other_machines_or_databases_are_flagged(tmp_path):
    rows = [{"nodes": 100, "jobs": 1000, "median_ms": 10.0, "placed": 40}]
    before = write(tmp_path, "bench-1.json", run("t1", rows, cpu="Intel Xeon", vendor="sqlite"))
    after = write(tmp_path, "bench-2.json", run("t2", rows))
    report = compare.comparison(before, after)
    assert "different machines" in report and "different databases" in report and "10.00 (same)" in report


def test_a_run_saved_before_rows_had_keys_is_compared_by_the_other_runs_key(tmp_path):
    old = run("t1", [{"nodes": 100, "jobs": 1000, "median_ms": 12.0, "placed": 40}])
    del old["benchmarks"]["plan_pass"]["key"], old["benchmarks"]["plan_pass"]["columns"]
    before = write(tmp_path, "bench-1.json", old)
    after = write(tmp_path, "bench-2.json", run("t2", [{"nodes": 100, "jobs": 1000, "median_ms": 6.0, "placed": 40}]))
    assert "12.00 -> 6.00 (-50%)" in compare.comparison(before, after)
    assert "made before bench.compare" in compare.comparison(before, before)


def test_without_arguments_it_compares_the_two_newest_runs(tmp_path, monkeypatch, capsys):
    for index, median in enumerate((30.0, 20.0, 10.0)):
        write(tmp_path, f"bench-2026120{index}T000000Z.json",
              run(f"t{index}", [{"nodes": 1, "jobs": 1, "median_ms": median, "placed": 1}]))
    write(tmp_path, "latest.json", {"not": "a run"})
    monkeypatch.setattr(compare, "RESULTS_DIR", tmp_path)
    assert compare.main([]) == 0
    assert "20.00 -> 10.00 (-50%)" in capsys.readouterr().out
    assert compare.main([str(tmp_path / "bench-20261200T000000Z.json")]) == 0
    assert "30.00 -> 10.00 (-67%)" in capsys.readouterr().out


@pytest.mark.parametrize(("files", "message"), [
    ({}, "holds 0 benchmark run(s): run make bench twice"),
    ({"bench-1.json": "{}"}, "holds 1 benchmark run(s): run make bench again"),
])
def test_too_few_runs_is_a_clear_error(tmp_path, monkeypatch, capsys, files, message):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    monkeypatch.setattr(compare, "RESULTS_DIR", tmp_path)
    assert compare.main([]) == 2
    assert message in capsys.readouterr().err


def test_a_file_that_is_not_a_run_is_named_in_the_error(tmp_path, capsys):
    (tmp_path / "a.json").write_text("not json")
    (tmp_path / "b.json").write_text('{"chaos": true}')
    assert compare.main([str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 2
    assert "a.json: not JSON" in capsys.readouterr().err
    assert compare.main([str(tmp_path / "b.json"), str(tmp_path / "missing.json")]) == 2
    assert "b.json: not a benchmark run" in capsys.readouterr().err
