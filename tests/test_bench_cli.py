"""bench/cli.py runs what it says it times (no time is asserted: benchmarks are not tests)."""

import os
import subprocess

import pytest

import bench.cli
from bench.__main__ import parse_args, selected_benchmarks
from bench.cli import STARTUP_COMMANDS, _cli_command, _cli_environment, _loop_seconds, bench_cli_startup
from bench.scheduler_pass import QUICK


def _no_wheel():
    raise RuntimeError("pip could not build it")


def test_the_startup_benchmark_has_a_row_per_command_and_judges_the_target(monkeypatch) -> None:
    monkeypatch.setattr(bench.cli, "_wheel_environment", _no_wheel)
    section = bench_cli_startup(QUICK)
    assert [(row["install"], row["command"]) for row in section.rows] == [
        ("editable", label) for label, _ in STARTUP_COMMANDS]
    assert all(row["runs"] == 7 and row["median_ms"] > 0 for row in section.rows)
    assert section.notes[0].startswith("target: every command under 50 ms (editable install; ")
    assert "wheel install: could not be built (pip could not build it)" in section.notes[1]


def test_the_wheel_install_runs_the_cli_from_site_packages_without_the_editable_finder(tmp_path) -> None:
    bin_dir = bench.cli._wheel_environment()
    report = "import sys, trainhub.cli.main; print(trainhub.cli.main.__file__); print(sorted(sys.modules))"
    # Elsewhere than the checkout: `python -c` looks in the current directory first (the console script does not).
    run = subprocess.run([str(bin_dir / "python"), "-c", report], capture_output=True, text=True, check=True,
                         cwd=tmp_path, env={"PATH": os.environ["PATH"]})
    where, modules = run.stdout.splitlines()
    assert where.startswith(str(bin_dir.parent / "lib")) and "/site-packages/trainhub/" in where
    assert "__editable__" not in modules
    help_run = subprocess.run([str(bin_dir / "trainhub"), "--help"], capture_output=True, text=True, check=True)
    assert "command groups" in help_run.stdout


def test_a_loop_stops_at_the_first_failing_call_and_says_why(tmp_path) -> None:
    with pytest.raises(RuntimeError, match="unrecognized option '--bogus'"):
        _loop_seconds([*_cli_command(), "slurm", "sbatch", "--bogus"], _cli_environment(str(tmp_path)), 3)


def test_only_cli_selects_the_cli_benchmarks() -> None:
    selected = selected_benchmarks(parse_args(["--only", "cli"]).only)
    assert [benchmark.name for benchmark in selected] == ["cli_startup", "cli_sbatch_loop", "cli_array"]
    assert [benchmark.name for benchmark in selected_benchmarks(["cli_array"])] == ["cli_array"]
