"""trainhub replays fixtures/22.05/node.sh (``scontrol show node[s]`` on a fresh slurm-harness cluster
of 4 nodes x 16 CPUs x 8 GPUs, CR_CPU) and prints what scontrol printed: idle nodes; gpu2 given
Weight=5 and gpu3 drained (``Reason=x``) by scontrol update; three jobs running (gpu1 MIXED with
2 GPUs, gpu4 ALLOCATED, gpu2 MIXED with all 8 GPUs); host lists in the order asked, -o, unknown
names; then gpu1 drained while its job runs (MIXED+DRAIN) and gpu4 given features.

Every field is compared byte for byte but those only the real machine knows (scontrol_node's rules),
which are compared by shape: Arch, CPULoad, FreeMem, NodeAddr/NodeHostName/Port/Version, OS,
BootTime, SlurmdStartTime and LastBusyTime. The harness's nodes have untyped GPUs (Gres=gpu:8)
where trainhub's harness pool's are V100s (Gres=gpu:v100:8, as its slurm.conf says).

The recording's clock: the cluster's slurmds started at 21:05:18, gpu2's weight and gpu3's drain
at 21:05:19, the three sbatch then, started by the main scheduler a second later; gpu1 drained at
21:05:23.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from trainhub.inventory.models import Node, NodeState
from trainhub.slurm import reports
from trainhub.slurm.services.clusters import (
    node_features_set,
    node_state_set,
    node_weight_set,
)

from .test_real_slurm import harness_cluster
from .test_real_slurm_weight import replay_submissions

REAL = Path(__file__).parent / "fixtures" / "22.05" / "node"
START = dt.datetime(2026, 12, 5, 21, 5, 18, tzinfo=dt.UTC)
SECOND = dt.timedelta(seconds=1)
UPDATE = START + SECOND
BUSY = UPDATE + 5 * SECOND
DRAINED_BUSY = START + 5 * SECOND
WORK = "/tmp/node-scenario.Xq2Lm1"

#: The fields whose values only the real machine knows, and the shape each must have.
SHAPES = (
    (re.compile(r"Arch=\S+ "), "Arch=<arch> "),
    (re.compile(r"CPULoad=(?:\d+\.\d\d|N/A)"), "CPULoad=<load>"),
    (re.compile(r"FreeMem=(?:\d+|N/A) "), "FreeMem=<free> "),
    (re.compile(r"NodeAddr=\S+ NodeHostName=\S+ (?:Port=\d+ )?Version=\d+\.\d+\.\d+"), "<addresses, version>"),
    (re.compile(r"OS=\S.*? (?=\s+RealMemory=)"), "OS=<os> "),
    (re.compile(r"(BootTime|SlurmdStartTime|LastBusyTime)=(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d|None|Unknown)"),
     r"\1=<time>"),
)


def masked(text: str) -> str:
    """``text`` with the machine's fields replaced by their names, where they have their shape (a
    field of another shape stays, and differs)."""
    for pattern, replacement in SHAPES:
        text = pattern.sub(replacement, text)
    return text


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


def real_status(name: str) -> int:
    return int((REAL / f"{name}.err").read_text().rsplit("rc=", 1)[1])


def shown(report: reports.Report) -> str:
    """trainhub's text with the harness's untyped Gres (module docstring), machine fields masked."""
    return masked(report.text.replace("Gres=gpu:v100:8", "Gres=gpu:8"))


def node(name: str) -> Node:
    return Node.objects.get(name=name)


def _updates(cluster) -> None:
    """update-weight (replay_submissions's weights) and update-drain."""
    node_state_set(cluster=cluster, node=node("gpu3"), state=NodeState.DRAIN, reason="x", actor="root", now=UPDATE)


@pytest.fixture
def idle(cast):
    cluster, _ = replay_submissions(cast, START, REAL, submit=UPDATE, work=WORK, weights={"gpu2": 5},
                                    before=_updates)
    return cluster


def test_every_field_but_the_machines_is_slurms_byte_for_byte(idle):
    """The machine's fields have their shapes on both sides (each once per node, the times thrice)."""
    recorded, report = real("busy-all"), reports.scontrol_nodes(idle, now=BUSY)
    for pattern, _ in SHAPES:
        assert len(pattern.findall(report.text)) == len(pattern.findall(recorded)) in (4, 12)
    assert shown(report) == masked(recorded)


def test_the_jobs_ran_where_slurm_ran_them(idle):
    assert reports.squeue(idle, now=BUSY, format="%i|%j|%T|%D|%C|%b|%N|%r").text == real("squeue-o")


@pytest.mark.parametrize(("name", "asked", "one_liner"), [
    ("busy-list", "gpu1,gpu[3-4]", False), ("busy-o", "gpu2", True), ("order", "gpu3,gpu1,gpu1", False),
])
def test_a_host_list_shows_its_nodes_in_its_order(idle, name, asked, one_liner):
    report = reports.scontrol_nodes(idle, now=BUSY, nodes=asked, one_liner=one_liner)
    assert shown(report) == masked(real(name))
    assert report.missing == [] and real_status(name) == 0


@pytest.mark.parametrize(("name", "asked"), [("unknown", "gpu9"), ("unknown-list", "gpu1,nosuch")])
def test_an_unknown_name_prints_slurms_line_and_fails(idle, name, asked):
    """scontrol prints ``Node NAME not found`` on its standard output, in the name's place, and exits 1."""
    report = reports.scontrol_nodes(idle, now=BUSY, nodes=asked)
    assert shown(report) == masked(real(name))
    assert report.missing == [f"Node {asked.rsplit(',', 1)[-1]} not found"] and real_status(name) == 1


def test_a_list_scontrol_cannot_parse_is_refused_with_its_message(idle):
    recorded = (REAL / "bad-syntax.err").read_text()
    with pytest.raises(ValueError, match=re.escape("unable to parse node list gpu[2-3]x")) as caught:
        reports.scontrol_nodes(idle, now=BUSY, nodes="gpu[2-3]x")
    assert recorded == f"{caught.value}\nrc=1\n" and real("bad-syntax") == ""


def test_drained_nodes_with_and_without_jobs_and_features(idle):
    node_state_set(cluster=idle, node=node("gpu1"), state=NodeState.DRAIN, reason="maint window", actor="root",
                   now=DRAINED_BUSY)
    idle = node_features_set(cluster=idle, node=node("gpu4"), available="a100,ib", active="a100", actor="root",
                             now=DRAINED_BUSY)
    assert shown(reports.scontrol_nodes(idle, now=BUSY, nodes="gpu1,gpu4")) == masked(real("later"))


def test_idle_nodes_then_a_weight_and_a_drain_are_slurms(cast):
    """Before the updates every node idle, Weight=1, no AllocTRES; then gpu2 Weight=5 and gpu3
    IDLE+DRAIN with its reason, who set it and when."""
    cluster, _ = harness_cluster(cast, START)
    assert shown(reports.scontrol_nodes(cluster, now=START)) == masked(real("idle-all"))
    assert shown(reports.scontrol_nodes(cluster, now=START, nodes="gpu1")) == masked(real("idle-gpu1"))
    cluster = node_weight_set(cluster=cluster, node=node("gpu2"), weight=5, actor="root", now=UPDATE)
    _updates(cluster)
    assert shown(reports.scontrol_nodes(cluster, now=UPDATE, nodes="gpu2,gpu3")) == masked(real("updated"))
