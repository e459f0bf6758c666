"""trainhub replays mail.sh's preemption rounds (fixtures/22.05/mail: carol's four victims vB, vS, vN, vT
on gpu1-4 in partition batch, GraceTime=30, then an urgent -N 4 job) and ``scontrol show job`` of the
victims 3 s after the urgent job's submission prints what Slurm printed: still RUNNING in their
GraceTime, PreemptTime the moment they were chosen.

The PreemptMode=CANCEL round (CANCEL-scontrol-*) is compared. The REQUEUE and USERSIG rounds are not:
22.05 keeps a REQUEUE victim RUNNING until its GraceTime ends (REQUEUE-squeue.txt), where trainhub
requeues it (PENDING, BeginTime) when it is chosen and kills its batch script at the end of GraceTime.
"""

from __future__ import annotations

import datetime as dt
import shlex
from pathlib import Path

from django.contrib.auth import get_user_model

from trainhub.slurm import reports
from trainhub.slurm.models import JobNode, NodePhase, Partition, SlurmCluster
from trainhub.slurm.services.clusters import partition_update
from trainhub.slurm.services.jobs import Submission, job_submit
from trainhub.slurm.services.lifecycle import (
    job_batch_finished,
    job_node_epilog_finished,
    job_node_prolog_finished,
)

from .conftest import run_pass
from .test_real_slurm import finish, harness_cluster, scontrol_differences

REAL = Path(__file__).parent / "fixtures" / "22.05" / "mail"
SECOND = dt.timedelta(seconds=1)
#: Where mail.sh kept its victim script and recording (the victims' Command).
VICTIM = "/tmp/slurmh-mailsig/mail-victim.sh"
RECORDING = "/tmp/slurmh-mailsig/rec/mail"
VICTIMS = ("vB", "vS", "vN", "vT")


def _victim_lines() -> dict[str, list[str]]:
    """mail.sh's ``rec "$mode-vX" $S ...`` lines: victim name -> its sbatch options."""
    found = {}
    for line in (REAL.parent / "mail.sh").read_text().splitlines():
        if line.strip().startswith('rec "$mode-v'):
            words = shlex.split(line.strip())
            found[words[1].removeprefix("$mode-")] = words[3:words.index("$HERE/mail-victim.sh")]
    return found


def replay_round(cast, now, mode: str, first_job_id: int, submitted: dt.datetime) -> dict[str, str]:
    """One round: the victims submitted (and started) at ``submitted``, the urgent job 16 s later;
    scontrol show job of each victim 18 s after its start."""
    cluster, _ = harness_cluster(cast, now, PreemptExemptTime="00:00:00")
    carol = get_user_model().objects.get(username="carol")
    partition_update(partition=Partition.objects.get(cluster=cluster, name="batch"), actor="root",
                     config={"PriorityTier": "1", "GraceTime": "30", "PreemptMode": mode}, now=now)
    # carol's earlier jobs in mail.sh charged her fair-share (Priority=1428): one of them here
    SlurmCluster.objects.filter(pk=cluster.pk).update(last_decay_time=submitted - 120 * SECOND,
                                                      last_priority_time=submitted - 120 * SECOND)
    earlier = job_submit(cluster=cluster, user=carol, now=submitted - 120 * SECOND, submission=Submission(
        argv=("-A", "bio", "-p", "batch", "--wrap", "true")))
    run_pass(cluster, submitted - 120 * SECOND)
    finish(cluster, [earlier.job_id], submitted - 60 * SECOND)
    run_pass(cluster, submitted - 5 * SECOND)
    SlurmCluster.objects.filter(pk=cluster.pk).update(next_job_id=first_job_id)
    for name, options in _victim_lines().items():
        job_submit(cluster=cluster, user=carol, now=submitted, submission=Submission(
            argv=("-A", "bio", "-p", "batch", *options), script="#!/bin/bash\n", script_path=VICTIM,
            script_args=(f"{mode}-{name}", RECORDING), alloc_node="localhost", submit_dir="/tmp"))
    run_pass(cluster, submitted)
    for job_node in JobNode.objects.filter(job__cluster=cluster, phase=NodePhase.PROLOG):
        job_node_prolog_finished(job_node=job_node, exit_code=0, now=submitted)  # the victims' scripts run
    urgent = submitted + 16 * SECOND
    job_submit(cluster=cluster, user=carol, now=urgent, submission=Submission(
        argv=("-A", "bio", "-p", "urgent", "-J", "urgent", "-N", "4", "--gres=gpu:8", "--wrap", "sleep 2"),
        alloc_node="localhost", submit_dir="/tmp"))
    run_pass(cluster, urgent)
    cluster.refresh_from_db()
    return {f"{mode}-scontrol-{name}": reports.scontrol_jobs(cluster, now=submitted + 18 * SECOND,
                                                             job=str(first_job_id + index)).text
            for index, name in enumerate(VICTIMS)}


def test_preempt_mode_cancels_victims_stay_running_through_their_grace_time(cast, now):
    shown = replay_round(cast, now, "CANCEL", 40, dt.datetime(2026, 12, 4, 23, 33, 31, tzinfo=dt.UTC))
    assert scontrol_differences(shown, REAL) == {}



def test_a_requeued_victim_started_again_has_no_preempt_time(cast, now):
    """A run starts unchosen: the victims of a REQUEUE round, started again once the urgent job ended,
    show PreemptTime=None (as every running job in the other recordings)."""
    submitted = dt.datetime(2026, 12, 4, 23, 32, 8, tzinfo=dt.UTC)
    replay_round(cast, now, "REQUEUE", 35, submitted)
    cluster = SlurmCluster.objects.get(cluster_id="harness")
    killed = submitted + 46 * SECOND  # the end of their GraceTime
    for job_node in JobNode.objects.filter(job__cluster=cluster, phase=NodePhase.RUNNING):
        job_batch_finished(job_node=job_node, exit_code=0, signal=15, max_rss_kb=None, now=killed)
    for job_node in JobNode.objects.filter(job__cluster=cluster, phase=NodePhase.EPILOG):
        job_node_epilog_finished(job_node=job_node, exit_code=0, now=killed)
    run_pass(cluster, killed)  # the urgent job starts
    later = submitted + 300 * SECOND
    finish(cluster, [39], later)
    run_pass(cluster, later)
    text = reports.scontrol_jobs(cluster, now=later, job="35").text
    assert "   JobState=RUNNING " in text and " PreemptTime=None\n" in text
