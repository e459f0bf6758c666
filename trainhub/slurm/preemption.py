"""Preemption: who may preempt whom, which running jobs are chosen, and what happens to them.

Public API (pure Python, no Django)::

    PreemptJob(job_id, partition, qos=None, priority=0, start_time=None, node_count=1, requeue=True,
               restart_count=0, preempt_time=None)       # a running candidate or a pending preemptor
    PreemptPolicy(config, partitions={name: PartitionOptions}, qos={name: QosRecord})
        .can_preempt(preemptor, candidate, now) -> bool
        .candidates(preemptor, running, now) -> list[PreemptJob]    # preemptable, in Slurm's victim order
        .mode(candidate) -> "REQUEUE" | "CANCEL" | "OFF"             # what preemption does to it
        .grace_time(candidate) -> int
        .preemptable_at(candidate) -> datetime | None                 # start + PreemptExemptTime
    choose_victims(ordered_candidates, fits, *, reorder_count=1) -> list[PreemptJob] | None
        # ``fits(frozenset_of_job_ids) -> bool``: does the preemptor fit once these jobs are gone?
    preempt(policy, victim, now) -> PreemptAction
        # signal_at = when it was first chosen (its preempt_time, else now), kill_at = signal_at + GraceTime;
        # the job stays RUNNING until kill_at, then its run is recorded PREEMPTED and REQUEUE sends it
        # back to PENDING, CANCEL ends it PREEMPTED (services.lifecycle.job_preempt).
    grace_check_due(last_backfill, now) -> bool   # does slurmctld look at the victims past their GraceTime now?
    victim_end(end, kill_at) -> datetime | None   # a running job's end once it is a victim

Rules (reference section 4; slurm:src/plugins/preempt/partition_prio, preempt/qos,
src/interfaces/preempt.c, src/plugins/select/cons_tres/job_test.c, src/slurmctld/job_mgr.c):
- preempt/partition_prio: the candidate's partition PriorityTier must be lower than the preemptor's
  and its PreemptMode (partition's, else the cluster's) not OFF. preempt/qos: the preemptor's QOS
  Preempt list must name the candidate's QOS (the same QOS only with PreemptMode WITHIN, and then
  only of a lower-priority job). PreemptMode PRIORITY additionally requires a higher job priority.
  "The Priority of a QOS is NOT related to QOS preemption" (sacctmgr.1).
- Only running jobs are candidates, and not before ``start + PreemptExemptTime`` (the job QOS's
  PreemptExemptTime if set, else the cluster's; ``acct_policy_get_preemptable_time``).
- Candidates are tried lowest first by Slurm's "preempt priority": partition_prio
  ``(PriorityTier << 16) + min(nodes, 0xffff)``, qos ``(min(QOS Priority, 0xffff) << 16) + nodes``,
  so lower tiers and then smaller jobs go first; PreemptParameters=youngest_first is not offered.
- cons_tres removes candidates in that order until the job fits, then moves the job whose removal
  made it fit to the front and tries again (reorder_count times, default 1), which preempts fewer
  jobs (doc example: 2-, 4- and 8-node candidates for an 8-node job -> only the 8-node job). Jobs
  the final allocation does not need are then left alone. (Slurm orders the other candidates by
  how many usable nodes they hold; here they keep their order, as PreemptParameters=strict_order.)
- REQUEUE falls back to CANCEL for a job that cannot be requeued (``--no-requeue`` / JobRequeue=0).
  SUSPEND and GANG are not supported (the config parser refuses them): trainhub's agent cannot
  suspend a job.
- GraceTime: partition_prio uses the partition's GraceTime, preempt/qos the QOS's. As 22.05 does
  (fixtures/22.05/mail, trap-REQUEUE-*.txt, trap-CANCEL-*.txt): the tasks of the victim's steps get
  SIGTERM (and SIGCONT) at once, its batch shell and the shell's other children nothing, and its
  ``--signal`` is not sent; the job stays RUNNING, PreemptTime set (REQUEUE-squeue.txt,
  *-scontrol-*.txt); at ``now + GraceTime`` it is killed as at a cancel (SIGTERM to everything,
  SIGKILL KillWait later) and then requeued or ended (slurmctld-extract.txt: "preempted JobId=35 has
  been requeued" after the GraceTime, not when chosen; services.lifecycle.job_preempt). GraceTime 0
  does it at once.
- A victim already chosen (``preempt_time``) is chosen again while its GraceTime runs: its GraceTime
  still ends ``preempt_time + GraceTime`` (preempt.c ``_job_check_grace_internal`` signals a job once
  and then only tests its end). So is a second preemptor's: 22.05 keeps a victim in its GraceTime a
  candidate, but the first preemptor's try, in the same scheduler run, leaves its nodes to that one, and
  the second chooses a new victim (fixtures/22.05/preempt-grace: u2 preempts v2, not v1 again, and then
  starts beside u1 on v1's node; v2 is requeued or ended all the same when its own GraceTime is over).
- From its preemption on, slurmctld's end time of the victim is ``min(end, PreemptTime + GraceTime)``
  (preempt.c: ``end_time = MIN(end_time, preempt_time + grace_time)``): squeue's END_TIME, scontrol's
  EndTime and the other pending jobs' backfill estimates count its resources busy until then only.
- Nothing happens at the GraceTime's end itself: slurmctld requeues or kills a victim when it next
  looks -- its periodic ``job_time_limit`` check (every PERIODIC_TIMEOUT = 30 s, slurmctld.h) or a
  backfill iteration (every bf_interval, 30 s by default) that tries the victim's preemptor (node_scheduler.c
  ``_preempt_jobs`` -> ``slurm_job_preempt``), both timed from slurmctld's start (fixtures/22.05/
  preempt-grace, slurmctld-extract.txt: backfill at 21:11:15.104 and the check at 21:11:15.585, v1's
  GraceTime over at 21:11:12 -> requeued at 21:11:15; v2's at 21:11:17 -> at 21:11:45; preempt-requeue:
  over at 18:03:20, requeued 18:03:36 "for JobId=Invalid", by the periodic check). trainhub keeps one such
  clock, the backfill iterations' (``grace_check_due``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from trainhub.slurm.conf import PartitionOptions, SlurmConfig
from trainhub.slurm.limits import QosRecord

__all__ = [
    "PreemptAction",
    "PreemptJob",
    "PreemptPolicy",
    "choose_victims",
    "grace_check_due",
    "preempt",
    "victim_end",
]

_UINT16 = 0xFFFF
#: slurmctld.h's PERIODIC_TIMEOUT: seconds between slurmctld's ``job_time_limit`` checks.
PERIODIC_TIMEOUT = 30


@dataclass(frozen=True)
class PreemptJob:
    job_id: int
    partition: str
    qos: str | None = None
    priority: int = 0
    start_time: dt.datetime | None = None
    node_count: int = 1
    requeue: bool = True
    restart_count: int = 0
    #: When a preemption chose this running job before (its GraceTime runs from then); None: never.
    preempt_time: dt.datetime | None = None


@dataclass(frozen=True)
class PreemptAction:
    """What preemption does to one victim: signalled at ``signal_at`` (when it was first chosen), it
    runs until ``kill_at`` (signal_at + GraceTime); then REQUEUE returns it to PENDING, CANCEL ends it
    PREEMPTED (the run's record PREEMPTED either way)."""

    job_id: int
    mode: str
    signal_at: dt.datetime
    kill_at: dt.datetime
    run_state: str = "PREEMPTED"


@dataclass(frozen=True)
class PreemptPolicy:
    config: SlurmConfig
    partitions: Mapping[str, PartitionOptions]
    qos: Mapping[str, QosRecord]

    def _tier(self, job: PreemptJob) -> int:
        options = self.partitions.get(job.partition)
        return options.priority_tier if options else 1

    def _qos(self, job: PreemptJob) -> QosRecord | None:
        return self.qos.get(job.qos) if job.qos else None

    def mode(self, candidate: PreemptJob) -> str:
        """REQUEUE, CANCEL or OFF for this candidate (REQUEUE -> CANCEL if it cannot be requeued)."""
        mode = self.config.preempt_base_mode
        if self.config.preempt_type == "preempt/partition_prio":
            options = self.partitions.get(candidate.partition)
            mode = options.preempt_mode if options and options.preempt_mode else mode
        elif self.config.preempt_type == "preempt/qos":
            qos = self._qos(candidate)
            if qos and qos.preempt_mode.upper() not in ("CLUSTER", ""):
                mode = qos.preempt_mode.upper()
        else:
            return "OFF"
        if mode == "REQUEUE" and not (candidate.requeue and self.config.job_requeue):
            return "CANCEL"
        return mode

    def grace_time(self, candidate: PreemptJob) -> int:
        if self.config.preempt_type == "preempt/qos":
            qos = self._qos(candidate)
            return qos.grace_time if qos else 0
        options = self.partitions.get(candidate.partition)
        return options.grace_time if options else 0

    def preemptable_at(self, candidate: PreemptJob) -> dt.datetime | None:
        if candidate.start_time is None:
            return None
        qos = self._qos(candidate)
        exempt = qos.preempt_exempt_time if qos and qos.preempt_exempt_time is not None else (
            self.config.preempt_exempt_time)
        return candidate.start_time + dt.timedelta(seconds=exempt or 0)

    def can_preempt(self, preemptor: PreemptJob, candidate: PreemptJob, now: dt.datetime) -> bool:
        config = self.config
        if not config.preemption_enabled or candidate.start_time is None or self.mode(candidate) == "OFF":
            return False
        preemptable_at = self.preemptable_at(candidate)
        if preemptable_at is not None and now < preemptable_at:
            return False
        higher_priority = preemptor.priority > candidate.priority
        if "PRIORITY" in config.preempt_mode and not higher_priority:
            return False
        if config.preempt_type == "preempt/partition_prio":
            return self._tier(candidate) < self._tier(preemptor)
        preemptor_qos = self._qos(preemptor)
        if preemptor_qos is None or candidate.qos is None:
            return False
        if candidate.qos == preemptor_qos.name:
            return "WITHIN" in config.preempt_mode and higher_priority
        return candidate.qos in preemptor_qos.preempt

    def _preempt_priority(self, candidate: PreemptJob) -> int:
        size = min(candidate.node_count, _UINT16)
        if self.config.preempt_type == "preempt/qos":
            qos = self._qos(candidate)
            return (min(qos.priority if qos else 0, _UINT16) << 16) + size
        return (self._tier(candidate) << 16) + size

    def candidates(self, preemptor: PreemptJob, running: Iterable[PreemptJob], now: dt.datetime) -> list[PreemptJob]:
        """The running jobs ``preemptor`` may preempt, lowest preempt priority first (stable)."""
        eligible = [job for job in running if job.job_id != preemptor.job_id and self.can_preempt(preemptor, job, now)]
        return sorted(eligible, key=self._preempt_priority)


def _first_fit(order: list[PreemptJob], fits: Callable[[frozenset[int]], bool]) -> list[PreemptJob] | None:
    removed: list[PreemptJob] = []
    for job in order:
        removed.append(job)
        if fits(frozenset(j.job_id for j in removed)):
            return removed
    return None


def choose_victims(ordered_candidates: list[PreemptJob], fits: Callable[[frozenset[int]], bool], *,
                   reorder_count: int = 1) -> list[PreemptJob] | None:
    """The jobs to preempt so the preemptor fits, or None if preempting all candidates is not enough.

    ``ordered_candidates`` comes from :meth:`PreemptPolicy.candidates`. Returns [] when the job fits
    without preempting anything.
    """
    if fits(frozenset()):
        return []
    victims = _first_fit(ordered_candidates, fits)
    if victims is None:
        return None
    order = list(ordered_candidates)
    for _ in range(reorder_count):
        decisive = victims[-1]
        order = [decisive, *(job for job in order if job.job_id != decisive.job_id)]
        victims = _first_fit(order, fits) or victims
    kept = list(victims)
    for job in reversed(victims):  # leave alone what the final allocation does not need
        trial = [other for other in kept if other.job_id != job.job_id]
        if fits(frozenset(other.job_id for other in trial)):
            kept = trial
    return kept


def preempt(policy: PreemptPolicy, victim: PreemptJob, now: dt.datetime) -> PreemptAction:
    """The action for one chosen victim (see the module doc)."""
    mode = policy.mode(victim)
    if mode == "OFF":
        raise ValueError(f"job {victim.job_id} is not preemptable")
    chosen = victim.preempt_time or now
    return PreemptAction(job_id=victim.job_id, mode=mode, signal_at=chosen,
                         kill_at=chosen + dt.timedelta(seconds=policy.grace_time(victim)))


def grace_check_due(last_backfill: dt.datetime | None, now: dt.datetime) -> bool:
    """Whether slurmctld looks at the victims whose GraceTime is over at ``now`` (see the module doc):
    when PERIODIC_TIMEOUT seconds have passed since the last backfill iteration (``last_backfill``),
    which its periodic check follows within the second with the default bf_interval; at every pass
    where no backfill iteration ever ran (its periodic check has no clock to keep here then)."""
    return last_backfill is None or (now - last_backfill).total_seconds() >= PERIODIC_TIMEOUT


def victim_end(end: dt.datetime | None, kill_at: dt.datetime | None) -> dt.datetime | None:
    """A running job's end time (``end``: start + time limit, None without one) once it is a victim
    whose GraceTime ends at ``kill_at`` (None: not chosen): the earlier of the two (preempt.c
    ``end_time = MIN(end_time, preempt_time + grace_time)``; see the module doc)."""
    if kill_at is None:
        return end
    return min(end, kill_at) if end is not None else kill_at
