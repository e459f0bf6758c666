"""bench/cli.py runs what it says it times (no time is asserted: benchmarks are not tests)."""

import pytest

from bench.cli import STARTUP_COMMANDS, _cli_command, _cli_environment, _loop_seconds, bench_cli_startup
from bench.scheduler_pass import QUICK


def test_the_startup_benchmark_has_a_row_per_command_and_judges_the_target() -> None:
    section = bench_cli_startup(QUICK)
    assert [row["command"] for row in section.rows] == [label for label, _ in STARTUP_COMMANDS]
    assert all(row["runs"] == 7 and row["median_ms"] > 0 for row in section.rows)
    assert section.notes[0].startswith("target: every command under 50 ms - ")


def test_a_loop_stops_at_the_first_failing_call_and_says_why(tmp_path) -> None:
    with pytest.raises(RuntimeError, match="unrecognized option '--bogus'"):
        _loop_seconds([*_cli_command(), "slurm", "sbatch", "--bogus"], _cli_environment(str(tmp_path)), 3)
