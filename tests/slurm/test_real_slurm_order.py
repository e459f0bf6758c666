"""trainhub replays fixtures/22.05/order.sh (jobs of exactly equal priority, recorded on a fresh
slurm-harness cluster) and decides and lists them as Slurm 22.05.8 did:

A. 4 CPUs free per node, batch -N1 jobs of -n 4,4,4,2,4,2 (5-10) released together: the main
   scheduler starts them in job id order (5-7 on gpu[1-3], 8 on gpu4) until 9 does not fit; 10 waits
   behind it and backfill starts it. squeue lists the pending 10 before 9 (neither has a start time),
   then 9 with a start a year on (when the jobs 5-8 without a time limit end), past bf_window.
B. Batch and urgent -n 4 jobs alternating (15-20): the urgent ones (PriorityTier 10) start first, then
   15; squeue lists the urgent jobs started last first, pending 19 before 17.
C. Every node full until +10/20/30/40 min: backfill plans the five waiting jobs; squeue lists the
   latest planned first.

squeue's order: reports.squeue_first_sort, then -S P,t,-p (formats.in_squeue_order). The replay steps
its clock on the recording's (scontrol's SubmitTime, EligibleTime, StartTime; squeue's TIME).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from trainhub.slurm.models import SlurmCluster, SlurmJob
from trainhub.slurm.services.jobs import Submission, job_release, job_submit

from .conftest import run_pass
from .test_real_slurm import harness_cluster
from .test_real_slurm_sched import Replay

REAL = Path(__file__).parent / "fixtures" / "22.05" / "order"
SQ = "%i|%j|%P|%T|%Q|%S|%N|%r"
BATCH = ("-A", "physics", "-p", "batch", "-o", "/dev/null")
URGENT = ("-A", "physics", "-p", "urgent", "-o", "/dev/null")


def real(name: str) -> str:
    return (REAL / f"{name}.txt").read_text()


def at(clock: str) -> dt.datetime:
    """A time of the recording (2026-12-05, UTC)."""
    return dt.datetime.fromisoformat(f"2026-12-05T{clock}+00:00")


class OrderReplay(Replay):
    def submit(self, moment: dt.datetime, *argv: str) -> SlurmJob:
        return job_submit(cluster=self.cluster, user=self.users["alice"],
                          submission=Submission(argv=(*argv, "--wrap", "sleep 900")), now=moment)

    def occupy(self, moment: dt.datetime, nodes: range, cpus: int, minutes: int | None = None) -> None:
        """order.sh's occupy: an urgent job on each node (``-t`` minutes times its number)."""
        for n in nodes:
            limit = ("-t", str(minutes * n)) if minutes else ()
            self.submit(moment, *URGENT, "-w", f"gpu{n}", "-n", str(cpus), *limit, "-J", f"o{n}")

    def held(self, moment: dt.datetime, *jobs: tuple[str, ...]) -> list[SlurmJob]:
        return [self.submit(moment, *argv[:6], "-H", *argv[6:]) for argv in jobs]

    def release(self, moment: dt.datetime, jobs: list[SlurmJob]) -> None:
        for job in jobs:
            job_release(job=job, actor=self.users["alice"], is_admin=False, now=moment)

    def listed(self, phase: str, moment: dt.datetime) -> None:
        assert self.squeue(moment) == real(f"{phase}-squeue")
        assert self.squeue(moment, format=SQ) == real(f"{phase}-squeue-o")
        assert self.squeue(moment, start=True) == real(f"{phase}-squeue-start")


@pytest.fixture
def replay(cast, now):
    cluster, _ = harness_cluster(cast, now)
    # slurmctld started at 11:50:17: its backfill iterations (bf_interval 30 s) and decay thread
    # (PriorityCalcPeriod 1 minute) ran at 11:50:47 and 11:51:17
    SlurmCluster.objects.filter(pk=cluster.pk).update(last_backfill_time=at("11:50:17"),
                                                      last_priority_time=at("11:50:17"), last_decay_time=at("11:50:17"))
    return OrderReplay(cluster, cast)


def phase_a(replay: OrderReplay) -> None:
    replay.occupy(at("11:50:21"), range(1, 5), 12)
    run_pass(replay.cluster, at("11:50:21"))
    jobs = replay.held(at("11:50:23"), *((*BATCH, "-N1", "-n", n, "-J", f"n{n}") for n in "444242"))
    replay.release(at("11:50:24"), jobs)
    run_pass(replay.cluster, at("11:50:24"))


def test_equal_jobs_start_in_job_id_order_and_squeue_lists_them_as_slurm(replay):
    phase_a(replay)
    replay.listed("a-main", at("11:50:26"))
    run_pass(replay.cluster, at("11:50:47"))  # backfill starts 10, gives 9 a start a year on
    replay.listed("a", at("11:50:58"))


def phase_b(replay: OrderReplay) -> None:
    phase_a(replay)
    run_pass(replay.cluster, at("11:50:47"))
    replay.clear(at("11:50:58"))
    replay.occupy(at("11:50:58"), range(1, 5), 12)
    run_pass(replay.cluster, at("11:50:59"))
    jobs = replay.held(at("11:51:02"), *((*partition, "-N1", "-n", "4", "-J", "h4")
                                         for partition in (BATCH, URGENT) * 3))
    replay.release(at("11:51:02"), jobs)
    run_pass(replay.cluster, at("11:51:02"))


def test_a_higher_tier_goes_first_and_squeue_lists_the_latest_started_first(replay):
    phase_b(replay)
    replay.listed("b", at("11:51:05"))


def test_squeue_lists_the_latest_planned_first(replay):
    phase_b(replay)
    replay.clear(at("11:51:05"))
    replay.occupy(at("11:51:05"), range(1, 3), 16, minutes=10)
    run_pass(replay.cluster, at("11:51:06"))
    replay.occupy(at("11:51:06"), range(3, 5), 16, minutes=10)
    run_pass(replay.cluster, at("11:51:09"))
    jobs = replay.held(at("11:51:09"), *((*BATCH, "-N1", "-n", "16", *limit, "-J", name)
                                         for limit, name in [(("-t", "5"), "t5")] * 3 + [((), "tnone")] * 2))
    replay.release(at("11:51:12"), jobs)
    run_pass(replay.cluster, at("11:51:12"))
    run_pass(replay.cluster, at("11:51:17"))  # alice's usage lowers their priority; backfill plans them
    replay.listed("c", at("11:51:44"))
