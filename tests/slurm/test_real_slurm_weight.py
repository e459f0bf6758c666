"""trainhub replays fixtures/22.05/weight.sh (slurm.conf ``Weight=30, 10, 20, 10`` for gpu1..gpu4,
recorded on a fresh slurm-harness cluster of 4 nodes x 16 CPUs x 8 GPUs) and places the jobs as Slurm:
the usable nodes of the lowest weight first, the next weight's only for what they cannot hold.

The recording's clock: the six sbatch at 17:55:29, slurmctld's main scheduler started them all at
17:55:30; squeue and scontrol three seconds later (scontrol's RunTime).
"""

from __future__ import annotations

import datetime as dt
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest

from trainhub.inventory.models import Node
from trainhub.slurm import hostlist, reports
from trainhub.slurm.models import JobNode, SlurmCluster
from trainhub.slurm.services.clusters import node_weight_set
from trainhub.slurm.services.jobs import Submission, job_submit, submitted_message
from trainhub.slurm.slurmconf import cluster_slurm_conf

from .conftest import run_pass
from .test_real_slurm import harness_cluster, scontrol_differences
from .test_real_slurm_sched import Replay

REAL = Path(__file__).parent / "fixtures" / "22.05" / "weight"
SUBMIT = dt.datetime(2026, 12, 5, 17, 55, 29, tzinfo=dt.UTC)
SECOND = dt.timedelta(seconds=1)
MAIN_RUN = SUBMIT + SECOND
#: The recording's $WORK (its sbatch's working directory).
WORK = "/tmp/weight-scenario.NLVADv"
WEIGHTS = {"gpu1": 30, "gpu2": 10, "gpu3": 20, "gpu4": 10}


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


def sbatch_lines(real_dir: Path = REAL) -> list[tuple[str, list[str]]]:
    """The recording script's sbatch lines: (fixture name, the arguments after ``$SB``)."""
    return [(words[1], words[5:]) for line in real_dir.with_suffix(".sh").read_text().splitlines()
            if line.startswith("rec sbatch-") for words in [shlex.split(line.split("#")[0])]]


def replay_submissions(cast, now, real_dir: Path, *, submit: dt.datetime, work: str,
                       weights: dict[str, int] | None = None,
                       before: Callable[[SlurmCluster], None] | None = None) -> tuple[SlurmCluster, dict[str, str]]:
    """A recording of alice's sbatch lines (``$SB`` = sbatch -A physics -p batch -o /dev/null) all at
    ``submit``, started by slurmctld's main scheduler a second later, on the harness's nodes of these
    ``weights``, after ``before`` changed the cluster (scontrol update's): the cluster and what each
    sbatch printed."""
    cluster, _ = harness_cluster(cast, now)
    for node in Node.objects.filter(name__in=weights or {}):
        cluster = node_weight_set(cluster=cluster, node=node, weight=weights[node.name], actor="root", now=now)
    if before is not None:
        before(cluster)
        cluster.refresh_from_db()
    # slurmctld's backfill thread last ran just before the submissions
    SlurmCluster.objects.filter(pk=cluster.pk).update(last_backfill_time=submit)
    alice = Replay(cluster, cast).users["alice"]
    printed = {}
    for name, args in sbatch_lines(real_dir):
        argv = ("-A", "physics", "-p", "batch", "-o", "/dev/null", *args)
        job = job_submit(cluster=cluster, user=alice, now=submit,
                         submission=Submission(argv=argv, alloc_node="localhost", submit_dir=work))
        printed[name] = submitted_message(job, Submission(argv=argv)) + "\n"
    run_pass(cluster, submit + SECOND)
    return cluster, printed


@pytest.fixture
def replay(cast, now):
    cluster, printed = replay_submissions(cast, now, REAL, submit=SUBMIT, work=WORK, weights=WEIGHTS)
    return cluster, printed, MAIN_RUN + 3 * SECOND


def node_weights(slurm_conf: str) -> dict[str, str]:
    """Each node's Weight= in slurm.conf's NodeName lines, as written (absent: "")."""
    weights = {}
    for line in slurm_conf.splitlines():
        if line.startswith("NodeName="):
            words = dict(word.split("=", 1) for word in line.split())
            weights.update(dict.fromkeys(hostlist.expand(words["NodeName"]), words.get("Weight", "")))
    return weights


def test_slurm_conf_gives_the_nodes_their_weights(replay):
    """weight/nodenames.txt: the harness's NodeName lines with Weight= (trainhub's join equal nodes)."""
    cluster, _, _ = replay
    assert node_weights(cluster_slurm_conf(cluster)) == node_weights(real("nodenames")) == {
        name: str(weight) for name, weight in WEIGHTS.items()}


def test_jobs_get_the_lowest_weight_nodes_first(replay):
    cluster, printed, moment = replay
    assert printed == {name: real(name) for name in printed}
    assert reports.squeue(cluster, now=moment, format="%i|%j|%T|%D|%C|%b|%N|%r").text == real("squeue-o")


def test_n_tasks_fill_the_lowest_weight_nodes_before_the_next(replay):
    """scontrol-d-4: ``-n 24`` with 7 and 15 CPUs free on gpu2 and gpu4 (weight 10) runs 7 and 15
    there and 2 on gpu3 (weight 20), leaving gpu4 no CPU for job 5 (gpu3)."""
    cluster, _, _ = replay
    cpus = dict(JobNode.objects.filter(job__cluster=cluster, job__job_id=4).values_list("node__name", "cpus"))
    assert cpus == {"gpu2": 7, "gpu3": 2, "gpu4": 15}


def test_scontrol_show_job_prints_what_it_printed(replay):
    cluster, _, moment = replay
    shown = {f"scontrol-{job_id}": reports.scontrol_jobs(cluster, now=moment, job=str(job_id)).text
             for job_id in range(1, 7)}
    assert scontrol_differences(shown, REAL) == {}
