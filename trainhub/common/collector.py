"""Python's cyclic garbage collector paused around work that makes many short-lived objects.

Pure Python (no Django): the scheduler pass uses it in the worker, and the placement benchmark
(bench/scheduler_pass.py, ``plan_pass``) times ``plan_pass`` under it as production runs it.
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
