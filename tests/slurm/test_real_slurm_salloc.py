"""trainhub replays salloc.sh's allocations 6 and 14 (fixtures/22.05/salloc: alice's ``salloc -A
physics -p batch -N1 sleep ...`` on the harness's cluster) and ``scontrol show job`` prints what
Slurm printed: job 6 running 4 s after it was granted (scontrol-6), job 14 after its salloc was
killed -9 under InactiveLimit=20 (scontrol-14: TIMEOUT, Reason=InactiveLimit, 63 s after its start;
Priority=1428, alice's fair-share charged with her earlier jobs' usage).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from django.contrib.auth import get_user_model

from trainhub.slurm import reports
from trainhub.slurm.models import SlurmCluster, SlurmJob
from trainhub.slurm.services.allocations import allocation_relinquish, allocation_submit
from trainhub.slurm.services.jobs import Submission

from .conftest import run_pass
from .test_real_slurm import harness, scontrol_differences  # noqa: F401 (a fixture)

REAL = Path(__file__).parent / "fixtures" / "22.05" / "salloc"
#: Where salloc.sh ran salloc (scontrol's WorkDir).
WORK = "/tmp/salloc-scenario.ywadHy"
SECOND = dt.timedelta(seconds=1)


def at(clock: str) -> dt.datetime:
    return dt.datetime.fromisoformat(f"2026-12-05T{clock}+00:00")


def _salloc(cluster, moment: dt.datetime) -> SlurmJob:
    alice = get_user_model().objects.get(username="alice")
    job = allocation_submit(cluster=cluster, user=alice, is_admin=False, now=moment, submission=Submission(
        argv=("-A", "physics", "-p", "batch", "-N1"), allocation=True, alloc_node="localhost", submit_dir=WORK))
    run_pass(cluster, moment)
    job.refresh_from_db()
    return job


def test_sallocs_allocations_show_as_in_slurm(harness):
    cluster, _ = harness
    # the decay thread's phase (PriorityCalcPeriod 1 minute) and jobs 1-5 (salloc.sh's, ended)
    SlurmCluster.objects.filter(pk=cluster.pk).update(next_job_id=6, last_decay_time=at("02:05:30"),
                                                      last_priority_time=at("02:05:30"))
    job = _salloc(cluster, at("02:06:05"))
    cluster.refresh_from_db()
    shown = {"scontrol-6": reports.scontrol_jobs(cluster, now=at("02:06:09"), job="6").text}
    allocation_relinquish(job=job, actor=job.submitted_by, exit_code=0, signal=0, now=at("02:06:25"))
    run_pass(cluster, at("02:06:30"))
    SlurmCluster.objects.filter(pk=cluster.pk).update(next_job_id=14, config={**cluster.config,
                                                                               "InactiveLimit": "20"})
    cluster.refresh_from_db()
    job = _salloc(cluster, at("02:16:54"))
    # salloc was killed at 02:16:58; slurmctld's inactivity check, on its own period, ended the job at
    # 02:17:57. trainhub ends it InactiveLimit after salloc's last call: that call is put where the
    # pass at 02:17:57 is the first past it.
    SlurmJob.objects.filter(pk=job.pk).update(salloc_seen=at("02:17:36"))
    run_pass(cluster, at("02:17:57"))
    cluster.refresh_from_db()
    shown["scontrol-14"] = reports.scontrol_jobs(cluster, now=at("02:18:00"), job="14").text
    assert scontrol_differences(shown, REAL) == {}
