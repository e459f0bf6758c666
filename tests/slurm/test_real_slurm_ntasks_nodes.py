"""trainhub replays fixtures/22.05/ntasks-nodes.sh (``-n N`` with ``-w`` and with ``-C``, each job alone
on an idle slurm-harness cluster of 4 nodes x 16 CPUs x 8 GPUs, gpu[1-2] with the feature a100 and
gpu[3-4] v100) and places the tasks, counts the nodes and refuses what Slurm refused."""

from __future__ import annotations

import datetime as dt
import re
import shlex
from pathlib import Path

import pytest

from trainhub.common.errors import ApiError
from trainhub.inventory.models import Node
from trainhub.slurm import hostlist, reports
from trainhub.slurm.models import JobNode, SlurmCluster
from trainhub.slurm.services.clusters import node_features_set
from trainhub.slurm.services.jobs import Submission, job_submit, submitted_message

from .conftest import run_pass
from .test_real_slurm import harness_cluster, scontrol_differences
from .test_real_slurm_sched import Replay

REAL = Path(__file__).parent / "fixtures" / "22.05" / "ntasks-nodes"
#: The recording's $WORK (its sbatch's working directory).
WORK = "/tmp/ntasks-nodes.1UL3BZ"
FEATURES = {"gpu1": "a100", "gpu2": "a100", "gpu3": "v100", "gpu4": "v100"}


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


def cases() -> list[tuple[str, list[str]]]:
    """ntasks-nodes.sh's cases: (name, the sbatch arguments after ``$SB``)."""
    return [(words[1], words[2:]) for line in REAL.with_suffix(".sh").read_text().splitlines()
            if line.startswith("case_ ") for words in [shlex.split(line.split("#")[0])]]


def recorded_time(name: str, field: str) -> dt.datetime:
    found = re.search(rf"\b{field}=(\S+)", real(f"scontrol-{name}"))
    return dt.datetime.fromisoformat(found[1]).replace(tzinfo=dt.UTC)


def recorded_cpus(name: str) -> dict[str, int]:
    """scontrol-d-NAME: each node's CPUs."""
    return cpus_by_node(real(f"scontrol-d-{name}"))


def cpus_by_node(scontrol_d: str) -> dict[str, int]:
    """Each node's CPUs in a recorded ``scontrol -d show job`` (``Nodes=gpu[2-3] CPU_IDs=0-15``)."""
    cpus = {}
    for nodes, ids in re.findall(r"^\s+Nodes=(\S+) CPU_IDs=(\S+)", scontrol_d, re.M):
        count = sum(int(b) - int(a) + 1 if "-" in part else 1
                    for part in ids.split(",") for a, _, b in [part.partition("-")])
        cpus.update(dict.fromkeys(hostlist.expand(nodes), count))
    return cpus


@pytest.fixture
def replay(cast, now):
    cluster, _ = harness_cluster(cast, now)
    for node in Node.objects.filter(name__in=FEATURES):
        cluster = node_features_set(cluster=cluster, node=node, available=FEATURES[node.name], active=None,
                                    actor="root", now=now)
    SlurmCluster.objects.filter(pk=cluster.pk).update(last_backfill_time=now)
    alice = Replay(cluster, cast).users["alice"]
    outcomes = {}
    moment = dt.datetime(2026, 12, 5, 17, 58, 50, tzinfo=dt.UTC)
    for name, args in cases():
        argv = ("-A", "physics", "-p", "batch", "-o", "/dev/null", *args, "--wrap", "sleep 900")
        submitted = recorded_time(name, "SubmitTime") if (REAL / f"scontrol-{name}.txt").exists() else moment
        try:
            job = job_submit(cluster=cluster, user=alice, now=submitted,
                             submission=Submission(argv=argv, alloc_node="localhost", submit_dir=WORK))
        except ApiError as error:
            outcomes[name] = (error.message + "\n", None)
            continue
        shown_at = dt.datetime.fromisoformat(real(f"date-{name}").strip()).replace(tzinfo=dt.UTC)
        run_pass(cluster, recorded_time(name, "LastSchedEval"))  # the main scheduler's run that looked at it
        outcomes[name] = (submitted_message(job, Submission(argv=argv)) + "\n", {
            "squeue": reports.squeue(cluster, now=shown_at, format="%i|%j|%T|%D|%C|%N|%r").text,
            "scontrol": reports.scontrol_jobs(cluster, now=shown_at, job=str(job.job_id)).text,
            "cpus": dict(JobNode.objects.filter(job=job).values_list("node__name", "cpus"))})
        Replay(cluster, cast).clear(shown_at)
        moment = shown_at + dt.timedelta(seconds=1)
    return outcomes


def test_sbatch_answers_as_slurm(replay):
    assert {name: printed for name, (printed, _) in replay.items()} == {
        name: real(f"sbatch-{name}") or real_error(name) for name in replay}


def real_error(name: str) -> str:
    return (REAL / f"sbatch-{name}.err").read_text().rsplit("rc=", 1)[0]


def test_the_jobs_get_slurms_nodes_and_task_layout(replay):
    """-w nodes take their tasks first, then the nodes after the first of them, then those before it
    (w1-n20: gpu3 16 and gpu4 4, not gpu1); -C keeps a job to its nodes; more CPUs than the partition
    pend with PartitionConfig, more than -C's nodes or a -w node without the feature are refused;
    ``-n 4 -N 2 -w gpu4`` gets 3 CPUs on gpu4 and 1 on gpu3 (the -w node takes its tasks first, leaving
    one for the node after it)."""
    for name, (_, shown) in replay.items():
        if shown is None:
            continue
        assert shown["squeue"] == real(f"squeue-{name}"), name
        assert shown["cpus"] == recorded_cpus(name), name


def test_scontrol_show_job_prints_what_it_printed(replay):
    shown = {f"scontrol-{name}": outcome["scontrol"] for name, (_, outcome) in replay.items() if outcome}
    assert scontrol_differences(shown, REAL) == {}
