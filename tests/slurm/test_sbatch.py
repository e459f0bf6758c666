"""sbatch option parsing: command lines, #SBATCH directives, --wrap, errors worded as sbatch's."""

import datetime as dt
import re

import pytest

from trainhub.slurm.sbatch import (
    NOT_A_SCRIPT,
    SbatchError,
    SbatchOptions,
    batch_script,
    parse_begin,
    parse_options,
    script_directives,
)
from trainhub.slurm.sbatch_argv import script_path


def test_it_reads_the_issue_command_line():
    options, rest = parse_options(["-p", "a4", "-A", "ml", "-q", "high", "-N", "2", "--gres=gpu:8", "-t", "1:00:00",
                                   "--wrap", "hostname"])
    assert rest == []
    assert (options.partition, options.account, options.qos, options.nodes) == ("a4", "ml", "high", 2)
    assert (options.gpus_per_node, options.time_limit, options.wrap) == (8, 60, "hostname")


def test_short_options_may_be_glued_and_long_ones_abbreviated():
    options, _ = parse_options(["-pa4", "--acc=ml", "--job=train", "-n4", "-c", "2"])
    assert (options.partition, options.account, options.job_name, options.ntasks, options.cpus_per_task) == (
        "a4", "ml", "train", 4, 2)


def test_what_follows_the_options_is_the_script_and_its_arguments():
    options, rest = parse_options(["-p", "a4", "job.sh", "-x", "1"])
    assert options.partition == "a4" and rest == ["job.sh", "-x", "1"]


@pytest.mark.parametrize("argv, message", [
    (["--frobnicate"], "sbatch: unrecognized option '--frobnicate'"),
    (["-Z"], "sbatch: invalid option -- 'Z'"),
    (["-p"], "sbatch: option requires an argument -- 'p'"),
    (["--n=2"], "sbatch: option '--n' is ambiguous"),
    (["-t", "soon"], "sbatch: error: Invalid --time specification"),
    (["-N", "0"], "sbatch: error: \"0\" is not a valid node count"),
    (["--gres=nic:1"], "this cluster has no nic GRES"),
    (["--hold=yes"], "sbatch: option '--hold' doesn't allow an argument"),
])
def test_it_refuses_what_sbatch_refuses(argv, message):
    with pytest.raises(SbatchError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_options(argv)


def test_gres_and_gpus_per_node_both_ask_gpus_per_node():
    assert parse_options(["--gres=gpu:b200:4"])[0].gpus_per_node == 4
    assert parse_options(["--gres=gpu:b200:4"])[0].gpu_type == "b200"
    assert parse_options(["--gpus-per-node=2"])[0].gpus_per_node == 2


def test_nice_without_a_value_is_100_and_time_zero_is_no_limit():
    assert parse_options(["--nice"])[0].nice == 100
    assert parse_options(["--nice=-5"])[0].nice == -5
    options = parse_options(["-t", "0"])[0]
    assert options.time_limit is None and options.time_given


SCRIPT = """#!/bin/bash
#SBATCH --job-name=train   # a trailing comment
#SBATCH -p a4 --gres=gpu:8
# an ordinary comment

#SBATCH -t 2:00:00
srun python train.py
#SBATCH --qos=ignored-after-the-first-command
"""


def test_sbatch_directives_stop_at_the_first_command():
    options = script_directives(SCRIPT)
    assert (options.job_name, options.partition, options.gpus_per_node, options.time_limit) == ("train", "a4", 8, 120)
    assert options.qos is None


def test_the_command_line_overrides_the_script():
    command_line, _ = parse_options(["-p", "other", "--no-requeue", "-t", "0"])
    options = command_line.over(script_directives(SCRIPT))
    assert (options.partition, options.job_name, options.requeue, options.time_limit) == ("other", "train", False, None)


def test_a_script_must_start_with_a_shebang_and_wrap_makes_one():
    with pytest.raises(SbatchError) as error:
        batch_script(script="echo hi", options=SbatchOptions())
    assert str(error.value) == NOT_A_SCRIPT
    assert batch_script(script=None, options=SbatchOptions(wrap="hostname")) == (
        "#!/bin/sh\n# This script was created by sbatch --wrap.\n\nhostname\n")


def test_begin_times():
    now = dt.datetime(2026, 1, 5, 10, 0, tzinfo=dt.UTC)
    assert parse_begin("now+1hours", now) == now + dt.timedelta(hours=1)
    assert parse_begin("now+90", now) == now + dt.timedelta(seconds=90)
    assert parse_begin("09:00", now) == dt.datetime(2026, 1, 6, 9, 0, tzinfo=dt.UTC)
    assert parse_begin("2026-02-01T12:00", now) == dt.datetime(2026, 2, 1, 12, 0, tzinfo=dt.UTC)
    with pytest.raises(SbatchError):
        parse_begin("whenever", now)


@pytest.mark.parametrize("text", ["now+99999999999999days", "now+9999999weeks"])
def test_a_begin_time_past_the_calendar_is_an_invalid_time_not_a_crash(text):
    with pytest.raises(SbatchError, match=re.escape(f"Invalid time specification {text}")):
        parse_begin(text, dt.datetime(2026, 1, 5, 10, 0, tzinfo=dt.UTC))


def test_the_clis_grammar_and_the_servers_parsers_name_the_same_options():
    from trainhub.slurm import sbatch, sbatch_argv

    assert set(sbatch._PARSERS) == set(sbatch_argv.OPTIONS)


def test_the_grammar_alone_finds_the_script_without_judging_the_values():
    from trainhub.slurm.sbatch_argv import split_options

    given, rest = split_options(["-t", "soon", "--nice", "--gres=gpu:2", "-H", "-pa4", "job.sh", "-t", "5"])
    assert given == [("time", "soon"), ("nice", None), ("gres", "gpu:2"), ("hold", None), ("partition", "a4")]
    assert rest == ["job.sh", "-t", "5"]


@pytest.mark.parametrize("search, files, found", [
    ("/opt/bin:./tools", {"/work/./tools/job.sh"}, "/work/./tools/job.sh"),  # "." entries are under --chdir
    ("/opt/bin::/usr/bin", {"/opt/bin/job.sh", "/usr/bin/job.sh"}, "/opt/bin/job.sh"),  # PATH's order
    ("/opt/bin", {"/work/job.sh", "/opt/bin/job.sh"}, "/work/job.sh"),  # the directory first
    (None, {"/work/job.sh"}, "job.sh"),  # no PATH: sbatch looks nowhere
])
def test_a_script_named_without_a_slash_is_looked_for_as_sbatch_does(search, files, found):
    assert script_path("job.sh", chdir="/work", search=search, is_file=files.__contains__) == found
