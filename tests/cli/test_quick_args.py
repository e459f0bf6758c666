"""`trainhub slurm sbatch` read without argparse (trainhub.cli.slurm_submit.quick_args) gives exactly
what argparse gives, or leaves the line to argparse: every error and help stays argparse's."""

from __future__ import annotations

import contextlib
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainhub.cli.client import _ParserExit
from trainhub.cli.main import build_parser, main
from trainhub.cli.slurm_submit import quick_args


def _argparse(argv: list[str]) -> dict | None:
    """argparse's namespace for argv (without the parser itself), or None where it refuses the line."""
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            namespace = build_parser().parse_args(argv)
    except _ParserExit:
        return None
    values = vars(namespace)
    values.pop("_parser")
    return values


@pytest.mark.parametrize("argv", [
    ["slurm", "sbatch", "-p", "a4", "-A", "acct0", "-t", "10", "--wrap", "hostname"],
    ["slurm", "sbatch", "--cluster", "bench", "-p", "a4", "--wrap", "hostname"],
    ["slurm", "sbatch", "-p", "a4", "--cluster=bench", "--region", "eu", "job.sh", "x", "--cluster", "c2"],
    ["slurm", "sbatch", "--url", "http://h:1", "--token=t", "--project", "p", "--wrap=true"],
    ["slurm", "sbatch", "-N2", "--gres=gpu:1", "--array=0-9", "-", "--comment", "", "--cluster", ""],
    ["slurm", "sbatch", "-H", "--nice=-5", "--exclusive", "---x", "-5", "--wrap", "a --cluster b"],
    ["slurm", "sbatch"],
    ["--url", "http://h:1", "slurm", "--token=t", "sbatch", "--url", "http://h:2", "--wrap", "x"],
    ["--project=p", "--project", "q", "slurm", "sbatch", "-p", "a4", "--wrap", "x"],
])
def test_a_plain_sbatch_line_reads_as_argparse_reads_it(argv: list[str]) -> None:
    quick = quick_args(argv)
    assert quick is not None
    assert vars(quick) == _argparse(argv)


@pytest.mark.parametrize("argv", [
    ["slurm", "sbatch", "--help"], ["slurm", "sbatch", "-h"], ["slurm", "sbatch", "-hx"], ["slurm", "sbatch", "--he"],
    ["slurm", "sbatch", "--", "x"], ["slurm", "sbatch", "--clus", "c"], ["slurm", "sbatch", "--cluster"],
    ["slurm", "sbatch", "--cluster", "-p", "a4"], ["slurm", "sbatch", "--reg=x"], ["--url", "slurm", "sbatch"],
    ["--cluster", "c", "slurm", "sbatch"], ["slurm", "-x", "sbatch"], ["slurm", "sbatch", "-h", "--url", "u"],
    ["slurm", "squeue"], ["slurm"], [], ["ai", "custom-jobs", "list"],
])
def test_anything_else_is_left_to_argparse(argv: list[str]) -> None:
    assert quick_args(argv) is None


def test_sbatchs_help_and_errors_are_argparses(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["slurm", "sbatch", "--help"], environ={}) == 0
    assert capsys.readouterr().out.startswith("usage: trainhub slurm sbatch [-h]")
    assert main(["slurm", "sbatch", "--cluster"], environ={}) == 2
    assert "argument --cluster: expected one argument" in capsys.readouterr().err


_TOKENS = st.sampled_from(["-p", "a4", "--cluster", "--cluster=c", "--region", "--url", "--token", "--project=p",
                           "--wrap", "--wrap=x y", "-h", "--help", "--", "-", "", "-5", "--c", "--regio", "-hx",
                           "-H", "--hold", "---", "--nice=-1", "x", "script.sh", "-t10", "--exclusive", "-A acct",
                           "--project", "--tok=t", "-u", "--url=http://h"])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(_TOKENS, st.text(max_size=6)), max_size=7), st.lists(_TOKENS, max_size=3),
       st.lists(_TOKENS, max_size=3))
def test_whenever_quick_args_reads_a_line_argparse_reads_it_the_same(rest: list[str], before: list[str],
                                                                     between: list[str]) -> None:
    argv = [*before, "slurm", *between, "sbatch", *rest]
    quick = quick_args(argv)
    if quick is not None:
        assert vars(quick) == _argparse(argv)
