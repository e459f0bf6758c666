"""The one timing helper every benchmark uses.

``measure`` runs an untimed ``setup`` before each run (to rebuild state that a run consumes),
collects garbage, then times only the call itself with ``time.perf_counter``. The garbage
collector stays enabled while timing: the scheduler runs with it enabled in production.

With ``--profile`` the CLI calls ``enable_profiling``: every timed call then runs under cProfile
and its stats are written next to the results; the times printed in that mode include the
profiler's overhead.
"""

from __future__ import annotations

import cProfile
import gc
import io
import pstats
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

T = TypeVar("T")

_profile_dir: Path | None = None
#: label -> path of the .prof file written for it, in the order they were written.
profiles: dict[str, Path] = {}


@dataclass(frozen=True)
class Timing(Generic[T]):
    """Wall-clock seconds of each run, and what the last run returned; also the CPU seconds this
    process spent in each run, which a busy machine inflates far less than wall-clock time (the
    database and Redis servers' own CPU is not in it)."""

    runs: tuple[float, ...]
    result: T = field(repr=False)
    cpu_runs: tuple[float, ...] = ()

    @property
    def median(self) -> float:
        return statistics.median(self.runs)

    @property
    def best(self) -> float:
        return min(self.runs)

    @classmethod
    def combine(cls, timings: list[Timing[T]]) -> Timing[T]:
        """One Timing of all the runs of several, keeping the last one's result (for benchmarks
        whose runs each need a fresh state that another timed step sets up)."""
        if not timings:
            raise ValueError("nothing to combine")
        return cls(tuple(run for timing in timings for run in timing.runs), timings[-1].result,
                   tuple(run for timing in timings for run in timing.cpu_runs))

    def figures(self, unit: str = "ms") -> dict[str, float | int]:
        """{"median_<unit>", "best_<unit>", "runs"} for a result row; unit is "ms" or "s"."""
        scale = {"ms": 1000.0, "s": 1.0}[unit]
        figures: dict[str, float | int] = {f"median_{unit}": self.median * scale, f"best_{unit}": self.best * scale,
                                           "runs": len(self.runs)}
        if self.cpu_runs:
            figures[f"median_cpu_{unit}"] = statistics.median(self.cpu_runs) * scale
        return figures


def enable_profiling(directory: Path) -> None:
    """Profile every later timed call, writing ``<directory>/profile-<label>.prof``."""
    global _profile_dir
    directory.mkdir(parents=True, exist_ok=True)
    _profile_dir = directory


def profiling_enabled() -> bool:
    return _profile_dir is not None


def measure(fn: Callable[[], T], *, repeat: int = 1, setup: Callable[[], object] | None = None,
            label: str = "") -> Timing[T]:
    """Time ``repeat`` calls of ``fn``, running ``setup`` (untimed) before each one."""
    if repeat < 1:
        raise ValueError("repeat must be at least 1")
    runs: list[float] = []
    cpu_runs: list[float] = []
    result: T
    for _ in range(repeat):
        if setup is not None:
            setup()
        gc.collect()
        profiler = cProfile.Profile() if _profile_dir is not None else None
        start, cpu_start = time.perf_counter(), time.process_time()
        if profiler is not None:
            result = profiler.runcall(fn)
        else:
            result = fn()
        runs.append(time.perf_counter() - start)
        cpu_runs.append(time.process_time() - cpu_start)
        if profiler is not None:
            _save_profile(profiler, label or getattr(fn, "__name__", "call"))
    return Timing(tuple(runs), result, tuple(cpu_runs))


def _save_profile(profiler: cProfile.Profile, label: str) -> None:
    assert _profile_dir is not None
    path = _profile_dir / f"profile-{re.sub(r'[^A-Za-z0-9_.-]+', '_', label)}.prof"
    profiler.dump_stats(path)
    profiles[label] = path


def profile_summary(path: Path, limit: int = 25) -> str:
    """The ``limit`` functions with the most cumulative time in a saved profile, as text."""
    out = io.StringIO()
    stats = pstats.Stats(str(path), stream=out)
    stats.strip_dirs().sort_stats("cumulative").print_stats(limit)
    return out.getvalue()
