"""Python's cyclic garbage collector paused around work that makes many short-lived objects, and
told to leave a server's start-up objects alone.

Pure Python (no Django): the scheduler pass uses it in the worker, the Slurm reports (sprio, squeue,
...) in the web process, the WSGI entry point freezes what start-up loaded, and the placement
benchmark (bench/scheduler_pass.py, ``plan_pass``) times ``plan_pass`` under it as production runs it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the length of a pass.

    A pass holds a dozen small objects per waiting job until it ends; with 10,000 jobs waiting the
    collector otherwise runs hundreds of times during the pass and scans the whole process at
    least once (a third of a pass's time, measured), for nothing: those objects hold no reference
    cycles and reference counting frees them when the pass returns. Collection resumes after it.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def freeze_loaded_objects() -> None:
    """Move every object alive now out of the collector's reach (``gc.freeze``), after a server has
    loaded its application.

    Django, DRF and trainhub's modules are ~150,000 tracked objects that live as long as the
    process. Every full collection scans them all, and a request that builds a 10,000-job report
    triggers about one in three requests: ~30 ms of a 10k sprio request's ~90 ms of CPU went to the
    collector (measured in-process, issue 21). Frozen objects are never scanned; they were never
    garbage (the same is what keeps a forked worker's pages shared, as CPython's docs advise).
    """
    gc.collect()
    gc.freeze()
