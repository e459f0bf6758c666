"""trainhub replays fixtures/22.05/preempt-requeue (preempt-requeue.sh): carol's victim on gpu1 in partition
batch (PreemptMode=REQUEUE, GraceTime=30), then an urgent job wanting gpu1's 8 GPUs. squeue, scontrol
show job of both and sacct print what Slurm printed: in the GraceTime (grace-*: the victim RUNNING with
its PreemptTime, the urgent job PENDING with no expected start), when the victim was requeued
(requeued-*: PENDING, BeginTime, Restarts=1, submitted again then, eligible and expected 121 s later; the
urgent job started at once; started-*, taken once squeue showed it RUNNING, are the same) and after
(sacct: the victim's run PREEMPTED, ended at its requeue).

slurmctld requeued the victim 16 s after its GraceTime ended (18:03:20), when its periodic check found it
over (requeued-at.txt, slurmctld-extract.txt: "for JobId=Invalid", job_mgr.c ``job_time_limit``); trainhub
does at its first pass where that check is due (preemption.grace_check_due: 30 s after the last backfill
iteration), here replayed at that moment.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from django.contrib.auth import get_user_model

from trainhub.slurm import reports
from trainhub.slurm.models import JobNode, NodePhase, Partition, SlurmCluster
from trainhub.slurm.services.clusters import partition_update
from trainhub.slurm.services.jobs import Submission, job_submit
from trainhub.slurm.services.lifecycle import job_node_prolog_finished

from .conftest import run_pass
from .test_real_slurm import harness_cluster, scontrol_differences

REAL = Path(__file__).parent / "fixtures" / "22.05" / "preempt-requeue"
SECOND = dt.timedelta(seconds=1)
SQUEUE = "%i|%j|%T|%r|%S|%e"


def at(clock: str) -> dt.datetime:
    return dt.datetime.fromisoformat(f"2026-12-05T{clock}").replace(tzinfo=dt.UTC)


#: A run of slurmctld's decay thread (PriorityCalcPeriod=1): its next, in the victim's GraceTime, charged
#: the victim's usage so far, which lowered carol's fair-share and the pending urgent job's priority
#: (10000 -> 4285 in requeued-scontrol-urgent.txt), not the running victim's.
DECAY = at("18:02:18")


def _epoch(name: str) -> dt.datetime:
    return dt.datetime.fromtimestamp(int((REAL / name).read_text()), dt.UTC)


def replay(cast, now):
    """The recording up to the urgent job's first try (18:02:50), the victim's script running."""
    cluster, _ = harness_cluster(cast, now, PreemptExemptTime="00:00:00")
    partition_update(partition=Partition.objects.get(cluster=cluster, name="batch"), actor="root",
                     config={"PriorityTier": "1", "GraceTime": "30", "PreemptMode": "REQUEUE"}, now=now)
    carol = get_user_model().objects.get(username="carol")
    SlurmCluster.objects.filter(pk=cluster.pk).update(last_decay_time=DECAY, last_priority_time=DECAY)

    def sbatch(moment: dt.datetime, *argv: str) -> None:
        job_submit(cluster=cluster, user=carol, now=moment, submission=Submission(
            argv=("-A", "bio", *argv, "-w", "gpu1", "--gres=gpu:8", "-o", "/dev/null"), alloc_node="localhost",
            submit_dir="/tmp"))

    sbatch(at("18:02:39"), "-p", "batch", "-J", "victim", "--wrap", "sleep 600")
    run_pass(cluster, at("18:02:42"))
    for job_node in JobNode.objects.filter(job__cluster=cluster, phase=NodePhase.PROLOG):
        job_node_prolog_finished(job_node=job_node, exit_code=0, now=at("18:02:42"))
    urgent = _epoch("urgent-at.txt")
    sbatch(urgent, "-p", "urgent", "-J", "urgent", "--wrap", "sleep 300")
    run_pass(cluster, urgent + SECOND)  # its LastSchedEval, the victim's PreemptTime
    return cluster


def shown(cluster, phase: str, moment: dt.datetime) -> dict[str, str]:
    return {f"{phase}-scontrol-{name}": reports.scontrol_jobs(cluster, now=moment, job=str(job_id)).text
            for job_id, name in ((1, "victim"), (2, "urgent"))}


def squeue(cluster, moment: dt.datetime) -> str:
    return reports.squeue(cluster, now=moment, format=SQUEUE).text


def test_in_its_grace_time_the_victim_runs_and_the_urgent_job_waits_with_no_expected_start(cast, now):
    cluster = replay(cast, now)
    moment = _epoch("urgent-at.txt") + 3 * SECOND
    assert scontrol_differences(shown(cluster, "grace", moment), REAL) == {}
    assert squeue(cluster, moment) == (REAL / "grace-squeue.txt").read_text()


def test_the_victim_is_requeued_when_its_grace_time_is_found_over_and_the_urgent_job_starts(cast, now):
    cluster = replay(cast, now)
    # slurmctld's backfill iterations (and periodic checks) every 30 s: 18:03:06, then the check at 18:03:36
    SlurmCluster.objects.filter(pk=cluster.pk).update(last_backfill_time=at("18:03:06"))
    run_pass(cluster, DECAY + 60 * SECOND)
    requeued = _epoch("requeued-at.txt")
    run_pass(cluster, requeued)
    assert scontrol_differences(shown(cluster, "requeued", requeued), REAL) == {}
    assert squeue(cluster, requeued) == (REAL / "requeued-squeue.txt").read_text()
    fields = ["JobID", "JobName", "State", "ExitCode", "Submit", "Start", "End"]
    text = reports.sacct(cluster, now=requeued + 5 * SECOND, viewer="root", all_users=True, duplicates=True,
                         allocations=True, parsable=True, fields=fields).text
    # recorded with -P; trainhub's report prints -p, each line ending in a "|"
    assert [line.removesuffix("|") for line in text.splitlines()] == (REAL / "sacct.txt").read_text().splitlines()
