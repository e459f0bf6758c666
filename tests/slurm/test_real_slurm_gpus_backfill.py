"""trainhub replays fixtures/22.05/gpus-backfill.sh (issue 19): backfill plans a --gpus job on the nodes with
more free GPUs first, as the main scheduler would start it.

Jobs 1 (-w gpu1 --gres=gpu:7) and 2 (-w gpu3 --gres=gpu:6) hold GPUs for an hour, job 3 takes every CPU
left until 21:08:23, so job 4 (``-N 2 --gpus=4 -t 10``) pends. When job 3 ends gpu1 has 1 free GPU, gpu2 8,
gpu3 2 and gpu4 8: the backfill iteration at 21:05:46 plans it on gpu[2,4] (squeue --start's SCHEDNODES,
scontrol's SchedNodeList), not on the first two nodes in node order, gpu[1-2], which would hold its 4 GPUs too.
"""

from __future__ import annotations

import datetime as dt
import shlex
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from trainhub.slurm import reports
from trainhub.slurm.models import SlurmCluster
from trainhub.slurm.services.jobs import Submission, job_submit, submitted_message

from .conftest import run_pass
from .test_real_slurm import harness_cluster, scontrol_differences

REAL = Path(__file__).parent / "fixtures" / "22.05" / "gpus-backfill"
WORK = "/tmp/gpus-backfill.rgipEy"


def at(clock: str) -> dt.datetime:
    return dt.datetime.fromisoformat(f"2026-12-05T{clock}").replace(tzinfo=dt.UTC)


#: The recording's clock (scontrol-3, scontrol-4, squeue's START_TIME): slurmctld started at 21:05:16,
#: its backfill iterations (bf_interval 30 s) at 21:05:46; jobs 1 and 2 started as submitted, job 3 by
#: the main scheduler batch_sched_delay later, job 4 was submitted then.
SUBMITTED = {"1": at("21:05:20"), "2": at("21:05:20"), "3": at("21:05:21"), "4": at("21:05:23")}
PASSES = {"2": at("21:05:20"), "3": at("21:05:23"), "4": at("21:05:23")}
BACKFILL = at("21:05:46")
SHOWN = at("21:06:03")


def sbatch_lines() -> list[tuple[str, list[str]]]:
    """gpus-backfill.sh's sbatch lines: (job, the arguments after its ``$SB``)."""
    return [(words[1].removeprefix("sbatch-"), words[5:])
            for words in (shlex.split(line) for line in REAL.with_suffix(".sh").read_text().splitlines()
                          if line.startswith("rec sbatch-"))]


@pytest.fixture
def replayed(cast, now):
    cluster, _ = harness_cluster(cast, now)
    SlurmCluster.objects.filter(pk=cluster.pk).update(last_backfill_time=at("21:05:16"),
                                                      last_priority_time=at("21:05:16"),
                                                      last_decay_time=at("21:05:16"))
    alice = get_user_model().objects.get(username="alice")
    printed = {}
    for name, args in sbatch_lines():
        argv = ("-A", "physics", "-p", "batch", "-o", "/dev/null", *args)
        job = job_submit(cluster=cluster, user=alice, now=SUBMITTED[name],
                         submission=Submission(argv=argv, alloc_node="localhost", submit_dir=WORK))
        printed[f"sbatch-{name}"] = submitted_message(job, Submission(argv=argv)) + "\n"
        if name in PASSES:
            run_pass(cluster, PASSES[name])
    run_pass(cluster, BACKFILL)
    return cluster, printed


def test_sbatch_accepts_every_job(replayed):
    _, printed = replayed
    assert printed == {name: (REAL / f"{name}.txt").read_text() for name in printed}


def test_backfill_plans_the_nodes_with_more_free_gpus(replayed):
    """squeue --start: job 4 at 21:08:23 on gpu[2,4]."""
    cluster, _ = replayed
    assert reports.squeue(cluster, now=SHOWN, start=True).text == (REAL / "squeue-start.txt").read_text()
    shown = reports.squeue(cluster, now=SHOWN, format="%i|%T|%D|%C|%b|%N|%r|%S|%Y").text
    assert shown == (REAL / "squeue.txt").read_text()


def test_scontrol_shows_the_planned_nodes(replayed):
    cluster, _ = replayed
    cluster.refresh_from_db()
    shown = {f"scontrol-{job_id}": reports.scontrol_jobs(cluster, now=SHOWN, job=str(job_id)).text for job_id in (3, 4)}
    assert scontrol_differences(shown, REAL) == {}
