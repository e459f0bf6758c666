"""The scheduler_kill drill times each kill from the passes the worker has logged, not from a fixed window."""

import pytest

from bench.chaos.cluster import Process
from bench.chaos.drills import _kill_window


def _worker_with_passes(tmp_path, durations: list[float]) -> Process:
    log = tmp_path / "worker.log"
    log.write_text("".join(
        f"[INFO] scheduler pass led by host:1 started={100 + i:.6f} ended={100 + i + seconds:.6f} considered=1\n"
        for i, seconds in enumerate(durations)))
    return Process("worker", ["true"], {}, log)


def test_a_kill_lands_within_half_the_median_of_the_last_ten_passes(tmp_path):
    slow_start = [5.0] * 5  # passes before the last ten do not count
    worker = _worker_with_passes(tmp_path, slow_start + [0.004, 0.006, 0.008, 0.010, 0.012] * 2)

    assert _kill_window(worker) == pytest.approx(0.004, abs=1e-6)


def test_before_its_first_logged_pass_a_worker_is_killed_within_five_milliseconds(tmp_path):
    assert _kill_window(_worker_with_passes(tmp_path, [])) == 0.005
