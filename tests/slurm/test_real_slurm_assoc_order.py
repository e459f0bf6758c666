"""trainhub replays fixtures/22.05/assoc-order.sh (``sacctmgr modify user ... set qos+=/-=/=`` and the
association listings after each, recorded on a fresh slurm-harness cluster with start.sh's accounting)
and prints what sacctmgr printed, byte for byte: a modify changes no association's place in the lists."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from trainhub.slurm.services.sacctmgr import sacctmgr_run

from .test_real_slurm import harness  # noqa: F401 (a fixture)

REAL = Path(__file__).parent / "fixtures" / "22.05" / "assoc-order"


def _commands() -> list[tuple[str, str]]:
    """assoc-order.sh's recordings: (fixture name, the sacctmgr command line)."""
    found = []
    for line in (REAL.parent / "assoc-order.sh").read_text().splitlines():
        if line.startswith("rec "):
            words = shlex.split(line)
            found.append((words[1], shlex.join(words[2:])))
    return found


@pytest.fixture
def replayed(harness, now):
    cluster, _ = harness
    results = {}
    for name, line in _commands():
        result = sacctmgr_run(cluster=cluster, line=line, actor="root", is_admin=True, now=now)
        results[name] = (result.output, result.exit_code)
    return results


@pytest.mark.parametrize("name", [name for name, _ in _commands()])
def test_sacctmgr_prints_what_it_printed_on_the_harness(replayed, name):
    recorded = (REAL / f"{name}.err").read_text()
    assert replayed[name] == ((REAL / f"{name}.txt").read_text(), int(recorded.rsplit("rc=", 1)[1]))
