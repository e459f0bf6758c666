"""AccountingStorageEnforce: submit-time validation against associations, QOS and partitions, and the
pending reasons that association/QOS limits give at scheduling time -- Slurm's messages and strings.

Public API (pure Python, no Django)::

    AssocRecord(key, account, user=None, partition=None, parent=None, qos=frozenset(), default_qos=None,
                grp_jobs=None, grp_submit_jobs=None, grp_tres={}, grp_tres_mins={}, max_jobs=None,
                max_submit_jobs=None, max_tres_per_job={}, max_tres_per_node={}, max_wall_minutes=None,
                used_tres_minutes={})     # None = no limit; used_tres_minutes: the subtree's decayed usage
    QosRecord(name, priority=0, flags=frozenset(), grp_jobs=None, grp_submit_jobs=None, grp_tres={},
              max_jobs_per_user=None, max_jobs_per_account=None, max_submit_jobs_per_user=None,
              max_submit_jobs_per_account=None, max_tres_per_job={}, max_tres_per_node={},
              max_tres_per_user={}, max_tres_per_account={}, min_tres_per_job={}, max_wall_minutes=None,
              preempt=frozenset(), preempt_mode="CLUSTER", preempt_exempt_time=None, grace_time=0,
              usage_factor=1.0)
    LimitContext(config, associations={key: AssocRecord}, qos={name: QosRecord}, partitions={name: PartitionOptions})
        .find_association(user, account, partition) -> AssocRecord | None
        .chain(assoc_key) -> list[AssocRecord]          # the user's association up to the root
        .allowed_qos(assoc_key) / .default_qos(assoc_key)
    JobRequest(user, account, partition, qos, assoc_key, nodes, tres, time_limit_minutes)
    LimitUsage.of(context, [(JobRequest, running: bool), ...]); usage.add(job, running=); usage.start(job)
    validate_submission(context, usage, user=, account=, partition=, qos=, nodes=, tres=,
                        time_limit_minutes=, default_account=, most_nodes=, partition_nodes=,
                        from_tasks=, partition_cpus=) -> Submission        # raises SubmitRejected(message)
    partition_limit(partition, nodes=, time_limit_minutes=, partition_nodes=, most_nodes=, from_tasks=)
                        # PartitionNodeLimit / PartitionTimeLimit / None (submission and scheduler)
    limit_reason(context, usage, job) -> str | None      # why limits keep a pending job from starting
    tres_minutes_exhausted(context, job, allocated) -> str | None   # why a running job is killed (GrpTRESMins)
    SubmitRejected.message: one of Slurm's error strings below

Messages (slurm:src/common/slurm_errno.c): INVALID_ACCOUNT "Invalid account or account/partition
combination specified", INVALID_QOS "Invalid qos specification", ACCOUNTING_POLICY "Job violates
accounting/QOS policy (job submit limit, user's size and/or time limits)", INVALID_TIME_LIMIT
"Requested time limit is invalid (missing or exceeds some limit)", INVALID_NODE_COUNT "Node count
specification invalid", PARTITION_NOT_AVAIL "Required partition not available (inactive or drain)",
TOO_MANY_CPUS (ESLURM_TOO_MANY_REQUESTED_CPUS) "More processors requested than permitted".

Rules (reference section 5; slurm:src/slurmctld/acct_policy.c, job_mgr.c):
- ``associations`` (implied by limits/qos/safe): the job needs an association (user, account,
  partition) or (user, account); the account defaults to the user's default account. Partition
  AllowAccounts / AllowQos refuse with INVALID_ACCOUNT / INVALID_QOS.
- ``qos``: the QOS (requested, else the association's DefaultQOS, else its only allowed QOS, else the
  root's DefaultQOS, else "normal" -- job_mgr ``_get_default_qos``) must exist and be allowed. The
  allowed list is inherited from the nearest ancestor that has one, so the root association needs
  one (``sacctmgr add cluster`` gives it QOS normal).
- ``limits``: submit counts always reject (MaxSubmitJobs, GrpSubmitJobs, QOS MaxSubmitJobsPerUser/
  PerAccount, GrpSubmitJobs). Per-job limits (MaxTRESPerJob/PerNode, MaxWall, MinTRES, a Grp limit the
  job alone exceeds) reject only under strict checking -- Flags=DenyOnLimit on the partition QOS or the
  job QOS, or a job without QOS -- and otherwise leave the job pending with the reason.
- A job without a time limit gets the partition's DefaultTime, else the tightest MaxWall that applies,
  else the partition MaxTime (``_set_time_limit``).
- A QOS limit, where set, replaces the association's limit of the same kind (partition QOS first,
  unless the job QOS has OverPartQOS); Max* association limits are inherited from the nearest ancestor
  that sets them and count the user's jobs; Grp* limits apply at every level to the whole subtree.
- EnforcePartLimits=NO (default): over MaxTime / MaxNodes / the partition's node count pends
  (PartitionTimeLimit, PartitionNodeLimit; nodes first); ALL/ANY/YES reject, after the association and
  QOS, and before a feature no node has. A node range counts by its MAX (``-N 1-4`` under MaxNodes=2); a
  count from -n alone, or a constraint's counts, is no node limit (the node test, confined to MaxNodes, refuses
  a -n count over it: services.jobs._node_config_error). Before the node and time limits, ALL/ANY/YES refuse a job
  asking more CPUs than the partition has (TOO_MANY_CPUS); NO lets it pend. A DOWN partition pends
  (PartitionDown, after the node limits and before the time limit); DRAIN/INACTIVE reject.
- Scheduling-time order (acct_policy_job_runnable_pre_select, then _post_select): QOS then associations
  for job counts and wall time, then QOS then associations for TRES; the first limit hit is the reason.

- Association GrpTRESMins (acct_policy.c ``_validate_tres_usage_limits``): the subtree's decayed
  usage in TRES-minutes (``usage_tres_raw / 60``, truncated; PriorityDecayHalfLife and
  PriorityUsageResetPeriod apply) is held against the limit of each association above the user's,
  the root's excepted ("not enforced if set on the root association", sacctmgr.1), before that
  association's GrpTRES. A job requesting a TRES whose usage is at or over the limit waits
  (``AssocGrpCPUMinutesLimit``, ``AssocGrpGRESMinutes``, ...); with ``safe`` also one whose time
  limit times its request exceeds the limit or what is left of it. A running job of such an
  association is stopped as TIMEOUT ("Job is at or exceeds association ... group max TRES(...)
  minutes of L with U", ``acct_policy_job_time_out``; not with ``safe``, which never lets it start).

- QOS GrpTRESMins (``_qos_job_runnable_post_select``, before the QOS's GrpTRES): the same against the
  QOS's own decayed usage (its jobs' TRES-seconds, QOS usage_tres_raw): ``QOSGrpGRESMinutes``,
  ``QOSGrpCPUMinutesLimit``, ...; its running jobs holding that TRES end TIMEOUT ("Job is at or exceeds
  QOS Q's group max TRES(gres/gpu) minutes of L with U"). A job whose request alone is over the limit
  still starts while usage is under it (fixtures/22.05/qos_tres_mins: job 6, 40 GPU-minutes of 2).
- QOS MaxTRESMins (MaxTRESMinsPerJob; before MaxTRESPerJob): the job's time limit x its TRES over the
  limit waits (``QOSMaxGRESMinutesPerJob``, ``QOSMaxCpuMinutesPerJobLimit``, ...); a job without a
  time limit always is (job 4).

Not modelled: association MaxTRESMins, GrpTRESRunMins, GrpWall, accrue limits, UsageThreshold,
WCKeys; under ``safe``, running jobs' remaining TRES-minutes (grp_used_tres_run_secs) are not added
to a GrpTRESMins request.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from trainhub.slurm.conf import PartitionOptions, SlurmConfig
from trainhub.slurm.tres import tres_sort_key

__all__ = [
    "ACCOUNTING_POLICY",
    "INVALID_ACCOUNT",
    "INVALID_NODE_COUNT",
    "INVALID_QOS",
    "INVALID_TIME_LIMIT",
    "PARTITION_NOT_AVAIL",
    "AssocRecord",
    "JobRequest",
    "LimitContext",
    "LimitUsage",
    "QosRecord",
    "SubmitRejected",
    "Submission",
    "limit_reason",
    "partition_limit",
    "tres_minutes_exhausted",
    "validate_submission",
]

INVALID_ACCOUNT = "Invalid account or account/partition combination specified"
INVALID_QOS = "Invalid qos specification"
ACCOUNTING_POLICY = "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)"
INVALID_TIME_LIMIT = "Requested time limit is invalid (missing or exceeds some limit)"
INVALID_NODE_COUNT = "Node count specification invalid"
PARTITION_NOT_AVAIL = "Required partition not available (inactive or drain)"
TOO_MANY_CPUS = "More processors requested than permitted"


# --- reason strings (slurm:src/common/job_state_reason.c) ----------------------------------------

def _reasons(cpu: str, mem: str, node: str | None, energy: str, gres: str, license_: str | None, bb: str,
             billing: str, unknown: str) -> dict[str, str]:
    table = {"cpu": cpu, "mem": mem, "energy": energy, "gres": gres, "bb": bb, "billing": billing, "": unknown}
    if node:
        table["node"] = node
    if license_:
        table["license"] = license_
    return table


_ASSOC_GRP = _reasons("AssocGrpCpuLimit", "AssocGrpMemLimit", "AssocGrpNodeLimit", "AssocGrpEnergy",
                      "AssocGrpGRES", "AssocGrpLicense", "AssocGrpBB", "AssocGrpBilling", "AssocGrpUnknown")
_ASSOC_GRP_MINUTES = _reasons("AssocGrpCPUMinutesLimit", "AssocGrpMemMinutes", "AssocGrpNodeMinutes",
                              "AssocGrpEnergyMinutes", "AssocGrpGRESMinutes", "AssocGrpLicenseMinutes",
                              "AssocGrpBBMinutes", "AssocGrpBillingMinutes", "AssocGrpUnknownMinutes")
_ASSOC_MAX_PER_JOB = _reasons("AssocMaxCpuPerJobLimit", "AssocMaxMemPerJob", "AssocMaxNodePerJobLimit",
                              "AssocMaxEnergyPerJob", "AssocMaxGRESPerJob", "AssocMaxLicensePerJob",
                              "AssocMaxBBPerJob", "AssocMaxBillingPerJob", "AssocMaxUnknownPerJob")
_ASSOC_MAX_PER_NODE = _reasons("AssocMaxCpuPerNode", "AssocMaxMemPerNode", None, "AssocMaxEnergyPerNode",
                               "AssocMaxGRESPerNode", None, "AssocMaxBBPerNode", "AssocMaxBillingPerNode",
                               "AssocMaxUnknownPerNode")
_QOS_GRP = _reasons("QOSGrpCpuLimit", "QOSGrpMemLimit", "QOSGrpNodeLimit", "QOSGrpEnergy", "QOSGrpGRES",
                    "QOSGrpLicense", "QOSGrpBB", "QOSGrpBilling", "QOSGrpUnknown")
_QOS_GRP_MINUTES = _reasons("QOSGrpCPUMinutesLimit", "QOSGrpMemoryMinutes", "QOSGrpNodeMinutes",
                            "QOSGrpEnergyMinutes", "QOSGrpGRESMinutes", "QOSGrpLicenseMinutes", "QOSGrpBBMinutes",
                            "QOSGrpBillingMinutes", "QOSGrpUnknownMinutes")
_QOS_MAX_MINUTES_PER_JOB = _reasons("QOSMaxCpuMinutesPerJobLimit", "QOSMaxMemoryMinutesPerJob",
                                    "QOSMaxNodeMinutesPerJob", "QOSMaxEnergyMinutesPerJob", "QOSMaxGRESMinutesPerJob",
                                    "QOSMaxLicenseMinutesPerJob", "QOSMaxBBMinutesPerJob",
                                    "QOSMaxBillingMinutesPerJob", "QOSMaxUnknownMinutesPerJob")
_QOS_MAX_PER_JOB = _reasons("QOSMaxCpuPerJobLimit", "QOSMaxMemoryPerJob", "QOSMaxNodePerJobLimit",
                            "QOSMaxEnergyPerJob", "QOSMaxGRESPerJob", "QOSMaxLicensePerJob", "QOSMaxBBPerJob",
                            "QOSMaxBillingPerJob", "QOSMaxUnknownPerJob")
_QOS_MAX_PER_NODE = _reasons("QOSMaxCpuPerNode", "QOSMaxMemoryPerNode", None, "QOSMaxEnergyPerNode",
                             "QOSMaxGRESPerNode", None, "QOSMaxBBPerNode", "QOSMaxBillingPerNode",
                             "QOSMaxUnknownPerNode")
_QOS_MAX_PER_USER = _reasons("QOSMaxCpuPerUserLimit", "QOSMaxMemoryPerUser", "QOSMaxNodePerUserLimit",
                             "QOSMaxEnergyPerUser", "QOSMaxGRESPerUser", "QOSMaxLicensePerUser", "QOSMaxBBPerUser",
                             "QOSMaxBillingPerUser", "QOSMaxUnknownPerUser")
_QOS_MAX_PER_ACCOUNT = _reasons("MaxCpuPerAccount", "MaxMemoryPerAccount", "MaxNodePerAccount",
                                "MaxEnergyPerAccount", "MaxGRESPerAccount", "MaxLicensePerAccount",
                                "MaxBBPerAccount", "MaxBillingPerAccount", "MaxUnknownPerAccount")
_QOS_MIN = _reasons("QOSMinCpuNotSatisfied", "QOSMinMemory", "QOSMinNode", "QOSMinEnergy", "QOSMinGRES",
                    "QOSMinLicense", "QOSMinBB", "QOSMinBilling", "QOSMinUnknown")


#: The reasons of TRES limits that slurmctld counts only once select chose a job's nodes
#: (acct_policy_job_runnable_post_select: TRES, TRES-minutes, per-node and minimum limits), but the node
#: limits that cap the nodes before it (select_nodes' acct_policy_get_max_nodes); job counts and wall time
#: wait before it (_pre_select).
_AFTER_SELECTION = frozenset(
    reason for table in (_ASSOC_GRP, _ASSOC_MAX_PER_JOB, _QOS_GRP, _QOS_MAX_PER_JOB, _QOS_MAX_PER_USER,
                         _QOS_MAX_PER_ACCOUNT)
    for name, reason in table.items() if name != "node") | frozenset(
    reason for table in (_ASSOC_GRP_MINUTES, _QOS_GRP_MINUTES, _QOS_MAX_MINUTES_PER_JOB, _ASSOC_MAX_PER_NODE,
                         _QOS_MAX_PER_NODE, _QOS_MIN)
    for reason in table.values())


def counted_after_selection(reason: str | None) -> bool:
    """Whether a limit with this reason keeps a job waiting only after select chose its nodes, so that a
    node range has had its node test and shows its count (fixtures/22.05/job-records-mem mem-N3-4:
    ``-N 3-4 --mem=8000`` over GrpTRES=mem=20000 waits AssocGrpMemLimit showing NumNodes=4-4, where
    range-limits mn-N3-4 under MaxTRESPerJob=node=2 shows 3-4; review-records mins-N3-4-c3: ``-N 3-4 -c 3
    -t 5`` over MaxTRESMinsPerJob=cpu=10 at submission waits QOSMaxCpuMinutesPerJobLimit showing 4-4)."""
    return reason in _AFTER_SELECTION


def _reason(table: Mapping[str, str], tres: str) -> str:
    """The reason for a TRES name: ``gres/gpu`` -> the GRES entry (``_get_tres_state_reason``)."""
    kind = tres.split("/", 1)[0]
    return table.get(kind, table[""])


# --- records ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class AssocRecord:
    """An association with its own limits (None / missing TRES = not set here)."""

    key: str
    account: str
    user: str | None = None
    partition: str | None = None
    parent: str | None = None
    qos: frozenset[str] = frozenset()
    default_qos: str | None = None
    grp_jobs: int | None = None
    grp_submit_jobs: int | None = None
    grp_tres: Mapping[str, int] = field(default_factory=dict)
    grp_tres_mins: Mapping[str, int] = field(default_factory=dict)
    max_jobs: int | None = None
    max_submit_jobs: int | None = None
    max_tres_per_job: Mapping[str, int] = field(default_factory=dict)
    max_tres_per_node: Mapping[str, int] = field(default_factory=dict)
    max_wall_minutes: int | None = None
    #: Not a limit: the decayed TRES-minutes the association's subtree has used (GrpTRESMins holds it).
    used_tres_minutes: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class QosRecord:
    name: str
    priority: int = 0
    flags: frozenset[str] = frozenset()
    grp_jobs: int | None = None
    grp_submit_jobs: int | None = None
    grp_tres: Mapping[str, int] = field(default_factory=dict)
    grp_tres_mins: Mapping[str, int] = field(default_factory=dict)
    max_tres_mins_per_job: Mapping[str, int] = field(default_factory=dict)
    max_jobs_per_user: int | None = None
    max_jobs_per_account: int | None = None
    max_submit_jobs_per_user: int | None = None
    max_submit_jobs_per_account: int | None = None
    max_tres_per_job: Mapping[str, int] = field(default_factory=dict)
    max_tres_per_node: Mapping[str, int] = field(default_factory=dict)
    max_tres_per_user: Mapping[str, int] = field(default_factory=dict)
    max_tres_per_account: Mapping[str, int] = field(default_factory=dict)
    min_tres_per_job: Mapping[str, int] = field(default_factory=dict)
    max_wall_minutes: int | None = None
    preempt: frozenset[str] = frozenset()
    preempt_mode: str = "CLUSTER"
    preempt_exempt_time: int | None = None
    grace_time: int = 0
    usage_factor: float = 1.0

    #: Not a limit: the decayed TRES-minutes the QOS's jobs have used (GrpTRESMins holds it).
    used_tres_minutes: Mapping[str, int] = field(default_factory=dict)

    def has_flag(self, flag: str) -> bool:
        return flag.lower() in {f.lower() for f in self.flags}


@dataclass(frozen=True)
class JobRequest:
    """A job as limits see it. ``tres`` holds the job's totals (cpu, mem, node, billing, gres/gpu...);
    ``node`` is filled from ``nodes`` when missing."""

    user: str
    account: str
    partition: str
    qos: str | None
    assoc_key: str | None
    nodes: int = 1
    tres: Mapping[str, int] = field(default_factory=dict)
    time_limit_minutes: int | None = None

    @property
    def tres_with_nodes(self) -> dict[str, int]:
        return {"node": self.nodes, **self.tres}


@dataclass(frozen=True)
class Submission:
    """An accepted submission: the association, account, QOS and time limit the job gets, and the
    reason it will pend for (None if nothing known at submit time keeps it waiting)."""

    assoc_key: str | None
    account: str
    qos: str | None
    time_limit_minutes: int | None
    pending_reason: str | None = None


class SubmitRejected(ValueError):
    """A submission slurmctld would refuse; ``message`` is Slurm's text, ``reason`` the limit behind it."""

    def __init__(self, message: str, reason: str | None = None):
        self.message = message
        self.reason = reason
        super().__init__(message)


# --- context ------------------------------------------------------------------------------------

@dataclass
class LimitContext:
    config: SlurmConfig
    associations: Mapping[str, AssocRecord]
    qos: Mapping[str, QosRecord]
    partitions: Mapping[str, PartitionOptions]

    def __post_init__(self) -> None:
        self._by_identity = {(a.user, a.account, a.partition): a for a in self.associations.values() if a.user}
        self._chains: dict[str, list[AssocRecord]] = {}
        self._checks: dict[tuple, tuple[_Check, ...]] = {}
        self._qos_orders: dict[tuple[str, str | None], list[QosRecord]] = {}

    def find_association(self, user: str, account: str, partition: str | None) -> AssocRecord | None:
        """The user's association for the partition, else the one valid in every partition."""
        return self._by_identity.get((user, account, partition)) or self._by_identity.get((user, account, None))

    def chain(self, assoc_key: str | None) -> list[AssocRecord]:
        if assoc_key is None:
            return []
        if assoc_key not in self._chains:
            chain, seen = [], set()
            current = self.associations.get(assoc_key)
            while current is not None and current.key not in seen:
                chain.append(current)
                seen.add(current.key)
                current = self.associations.get(current.parent) if current.parent else None
            self._chains[assoc_key] = chain
        return self._chains[assoc_key]

    def allowed_qos(self, assoc_key: str) -> frozenset[str]:
        """The QOS list of the association, inherited from the nearest ancestor that has one."""
        return next((a.qos for a in self.chain(assoc_key) if a.qos), frozenset())

    def default_qos(self, assoc_key: str | None) -> str:
        chain = self.chain(assoc_key)
        explicit = next((a.default_qos for a in chain if a.default_qos), None)
        if explicit:
            return explicit
        allowed = self.allowed_qos(assoc_key) if assoc_key else frozenset()
        if len(allowed) == 1:
            return next(iter(allowed))
        root_default = chain[-1].default_qos if chain else None
        return root_default or "normal"

    def checks(self, job: JobRequest) -> tuple[_Check, ...]:
        """The compiled limit checks of ``job``'s (association, partition, QOS, user, account)."""
        key = (job.assoc_key, job.partition, job.qos, job.user, job.account)
        found = self._checks.get(key)
        if found is None:
            found = self._checks[key] = _compile_checks(self, job)
        return found

    def job_qos_order(self, job: JobRequest) -> list[QosRecord]:
        """Partition QOS then job QOS (job QOS first with OverPartQOS); the same QOS once (the
        list is shared by every job of that partition and QOS: do not change it)."""
        key = (job.partition, job.qos)
        found = self._qos_orders.get(key)
        if found is None:
            found = self._qos_orders[key] = self._job_qos_order(job)
        return found

    def _job_qos_order(self, job: JobRequest) -> list[QosRecord]:
        partition = self.partitions.get(job.partition)
        part_qos = self.qos.get(partition.qos) if partition and partition.qos else None
        job_qos = self.qos.get(job.qos) if job.qos else None
        order = [part_qos, job_qos]
        if job_qos and job_qos.has_flag("OverPartQOS"):
            order.reverse()
        unique: list[QosRecord] = []
        for qos in order:
            if qos and qos.name not in {q.name for q in unique}:
                unique.append(qos)
        return unique


# --- usage --------------------------------------------------------------------------------------

@dataclass
class _Counter:
    running_jobs: int = 0
    submitted_jobs: int = 0
    running_tres: dict[str, int] = field(default_factory=dict)

    def add(self, tres: Mapping[str, int], *, running: bool, submitted: bool) -> None:
        self.submitted_jobs += submitted
        if running:
            self.running_jobs += 1
            for name, count in tres.items():
                self.running_tres[name] = self.running_tres.get(name, 0) + count


@dataclass
class LimitUsage:
    """Jobs counted against limits: submitted = pending + running. Association counters hold the
    association's whole subtree; QOS counters are kept per QOS, per (QOS, user), per (QOS, account)."""

    context: LimitContext
    assoc: dict[str, _Counter] = field(default_factory=dict)
    qos: dict[str, _Counter] = field(default_factory=dict)
    qos_user: dict[tuple[str, str], _Counter] = field(default_factory=dict)
    qos_account: dict[tuple[str, str], _Counter] = field(default_factory=dict)

    @classmethod
    def of(cls, context: LimitContext, jobs: Iterable[tuple[JobRequest, bool]]) -> LimitUsage:
        usage = cls(context)
        for job, running in jobs:
            usage.add(job, running=running)
        return usage

    def __post_init__(self) -> None:
        self._counter_lists: dict[tuple, list[_Counter]] = {}

    def _counters(self, job: JobRequest) -> list[_Counter]:
        """The counters a job of (association, partition, QOS, user, account) counts in (found once
        per key: a pass counts thousands of jobs of a few dozen keys)."""
        key = (job.assoc_key, job.partition, job.qos, job.user, job.account)
        counters = self._counter_lists.get(key)
        if counters is None:
            counters = [self.assoc.setdefault(a.key, _Counter()) for a in self.context.chain(job.assoc_key)]
            for qos in self.context.job_qos_order(job):
                counters += [self.qos.setdefault(qos.name, _Counter()),
                             self.qos_user.setdefault((qos.name, job.user), _Counter()),
                             self.qos_account.setdefault((qos.name, job.account), _Counter())]
            self._counter_lists[key] = counters
        return counters

    def add(self, job: JobRequest, *, running: bool) -> None:
        """Count a newly submitted job (pending, or already running)."""
        for counter in self._counters(job):
            counter.add(job.tres_with_nodes, running=running, submitted=True)

    def start(self, job: JobRequest) -> None:
        """A counted pending job starts running (the scheduler calls this as it starts jobs)."""
        for counter in self._counters(job):
            counter.add(job.tres_with_nodes, running=True, submitted=False)

    def counter(self, table: str, key: object) -> _Counter:
        return getattr(self, table).get(key) or _Counter()


# --- effective limits ---------------------------------------------------------------------------

@dataclass(frozen=True)
class _QosLimits:
    """The QOS limits of a job after merging partition QOS and job QOS (first set wins)."""

    qos: tuple[QosRecord, ...]

    def first(self, attribute: str) -> tuple[QosRecord, int] | None:
        for qos in self.qos:
            value = getattr(qos, attribute)
            if value is not None:
                return qos, value
        return None

    def tres(self, attribute: str) -> dict[str, tuple[QosRecord, int]]:
        merged: dict[str, tuple[QosRecord, int]] = {}
        for qos in self.qos:
            for name, value in getattr(qos, attribute).items():
                merged.setdefault(name, (qos, value))
        return merged


def _inherited(chain: list[AssocRecord], attribute: str):
    """A Max* association limit: the user's own, else the nearest ancestor's (assoc_mgr inheritance)."""
    for assoc in chain:
        value = getattr(assoc, attribute)
        if value is not None:
            return value
    return None


def _inherited_tres(chain: list[AssocRecord], attribute: str) -> dict[str, int]:
    merged: dict[str, int] = {}
    for assoc in chain:
        for name, value in getattr(assoc, attribute).items():
            merged.setdefault(name, value)
    return merged


def _ordered(tres: Mapping[str, object]) -> list[str]:
    return sorted(tres, key=tres_sort_key)


def _per_node(job: JobRequest) -> dict[str, int]:
    return {name: math.ceil(count / max(job.nodes, 1)) for name, count in job.tres.items() if name != "node"}


# --- checks -------------------------------------------------------------------------------------

def _submit_count_reason(context: LimitContext, usage: LimitUsage, job: JobRequest) -> str | None:
    """Submit-count limits, counting this job: always a rejection."""
    qos = _QosLimits(tuple(context.job_qos_order(job)))
    for qos_record in qos.qos:
        checks = ((qos_record.grp_submit_jobs, usage.counter("qos", qos_record.name), "QOSGrpSubmitJobsLimit"),
                  (qos_record.max_submit_jobs_per_account,
                   usage.counter("qos_account", (qos_record.name, job.account)), "MaxSubmitJobsPerAccount"),
                  (qos_record.max_submit_jobs_per_user,
                   usage.counter("qos_user", (qos_record.name, job.user)), "QOSMaxSubmitJobPerUserLimit"))
        for limit, counter, reason in checks:
            if limit is not None and counter.submitted_jobs + 1 > limit:
                return reason
    chain = context.chain(job.assoc_key)
    for assoc in chain:
        if qos.first("grp_submit_jobs") is None and assoc.grp_submit_jobs is not None and (
                usage.counter("assoc", assoc.key).submitted_jobs + 1 > assoc.grp_submit_jobs):
            return "AssocGrpSubmitJobsLimit"
    max_submit = _inherited(chain, "max_submit_jobs")
    if chain and qos.first("max_submit_jobs_per_user") is None and max_submit is not None and (
            usage.counter("assoc", chain[0].key).submitted_jobs + 1 > max_submit):
        return "AssocMaxSubmitJobLimit"
    return None


def _over(used: int, job: int, limit: int) -> bool:
    return used + job > limit


#: Kinds of compiled checks (see _compile_checks): what the job adds and what it is compared with.
_JOBS, _WALL, _TRES, _PER_NODE, _MIN, _MINUTES, _JOB_MINUTES = range(7)


@dataclass(frozen=True)
class _Check:
    """One limit as it applies to the jobs of one (association, partition, QOS, user, account):
    ``kind`` _JOBS (running jobs of ``counter`` + 1 > limit), _WALL (time limit unset or over),
    _TRES (``counter``'s running TRES ``name``, or 0 with no counter, + the job's > limit),
    _PER_NODE (the job's per-node TRES ``name`` > limit), _MIN (the job's TRES ``name`` < limit) or
    _MINUTES (a job requesting TRES ``name`` while ``used`` TRES-minutes >= limit; with ``safe`` also
    its time limit x request > limit - used) or _JOB_MINUTES (the job's time limit x its TRES ``name``
    > limit; no time limit is always over)."""

    kind: int
    limit: int
    reason: str
    name: str = ""
    counter: tuple[str, object] | None = None
    used: int = 0


def _compile_checks(context: LimitContext, job: JobRequest) -> tuple[_Check, ...]:
    """The limits that apply to ``job``'s (association, partition, QOS, user, account), in
    acct_policy's order, with the QOS-over-association precedence and inheritance resolved (the
    same for every job of that key, so a pass compiles them once per key, not once per job)."""
    qos = _QosLimits(tuple(context.job_qos_order(job)))
    chain = context.chain(job.assoc_key)
    checks: list[_Check] = []
    # acct_policy_job_runnable_pre_select: job counts and wall time, QOS then associations.
    for attribute, table, key_of, reason in (
            ("grp_jobs", "qos", lambda q: q.name, "QOSGrpJobsLimit"),
            ("max_jobs_per_account", "qos_account", lambda q: (q.name, job.account), "MaxJobsPerAccount"),
            ("max_jobs_per_user", "qos_user", lambda q: (q.name, job.user), "QOSMaxJobsPerUserLimit")):
        found = qos.first(attribute)
        if found:
            checks.append(_Check(_JOBS, found[1], reason, counter=(table, key_of(found[0]))))
    wall = qos.first("max_wall_minutes")
    if wall:
        checks.append(_Check(_WALL, wall[1], "QOSMaxWallDurationPerJobLimit"))
    if not qos.first("grp_jobs"):
        checks += [_Check(_JOBS, assoc.grp_jobs, "AssocGrpJobsLimit", counter=("assoc", assoc.key))
                   for assoc in chain if assoc.grp_jobs is not None]
    max_jobs = _inherited(chain, "max_jobs")
    if chain and not qos.first("max_jobs_per_user") and max_jobs is not None:
        checks.append(_Check(_JOBS, max_jobs, "AssocMaxJobsLimit", counter=("assoc", chain[0].key)))
    assoc_wall = _inherited(chain, "max_wall_minutes")
    if not wall and assoc_wall is not None:
        checks.append(_Check(_WALL, assoc_wall, "AssocMaxWallDurationPerJobLimit"))

    # acct_policy_job_runnable_post_select: TRES, QOS then associations; a QOS's GrpTRESMins before
    # its GrpTRES, its MaxTRESMinsPerJob before its MaxTRESPerJob (_qos_job_runnable_post_select).
    grp_minutes = qos.tres("grp_tres_mins")
    for name in _ordered(grp_minutes):
        record, value = grp_minutes[name]
        checks.append(_Check(_MINUTES, value, _reason(_QOS_GRP_MINUTES, name), name,
                             used=record.used_tres_minutes.get(name, 0)))
    for attribute, table, kind, counter_of in (
            ("grp_tres", _QOS_GRP, _TRES, lambda q: ("qos", q.name)),
            ("max_tres_mins_per_job", _QOS_MAX_MINUTES_PER_JOB, _JOB_MINUTES, None),
            ("max_tres_per_job", _QOS_MAX_PER_JOB, _TRES, None),
            ("max_tres_per_node", _QOS_MAX_PER_NODE, _PER_NODE, None),
            ("max_tres_per_account", _QOS_MAX_PER_ACCOUNT, _TRES, lambda q: ("qos_account", (q.name, job.account))),
            ("max_tres_per_user", _QOS_MAX_PER_USER, _TRES, lambda q: ("qos_user", (q.name, job.user)))):
        limits = qos.tres(attribute)
        for name in _ordered(limits):
            record, value = limits[name]
            checks.append(_Check(kind, value, _reason(table, name), name, counter_of(record) if counter_of else None))
    minimum = qos.tres("min_tres_per_job")
    checks += [_Check(_MIN, minimum[name][1], _reason(_QOS_MIN, name), name) for name in _ordered(minimum)]
    qos_grp = qos.tres("grp_tres")
    for assoc in chain:
        if assoc.parent is not None:
            checks += [_Check(_MINUTES, assoc.grp_tres_mins[name], _reason(_ASSOC_GRP_MINUTES, name), name,
                              used=assoc.used_tres_minutes.get(name, 0)) for name in _ordered(assoc.grp_tres_mins)]
        checks += [_Check(_TRES, assoc.grp_tres[name], _reason(_ASSOC_GRP, name), name, ("assoc", assoc.key))
                   for name in _ordered(assoc.grp_tres) if name not in qos_grp]
    for attribute, table, kind in (("max_tres_per_job", _ASSOC_MAX_PER_JOB, _TRES),
                                   ("max_tres_per_node", _ASSOC_MAX_PER_NODE, _PER_NODE)):
        limits, qos_limits = _inherited_tres(chain, attribute), qos.tres(attribute)
        checks += [_Check(kind, limits[name], _reason(table, name), name)
                   for name in _ordered(limits) if name not in qos_limits]
    return tuple(checks)


def _limit_reasons(context: LimitContext, job: JobRequest, usage: LimitUsage | None) -> Iterable[str]:
    """Every limit keeping ``job`` from running, in acct_policy's order. With ``usage`` None the job
    is checked alone (strict submit checking): running-job counts are then not limits."""
    checks = context.checks(job)
    if not checks:
        return
    tres = job.tres_with_nodes
    per_node = _per_node(job) if any(check.kind == _PER_NODE for check in checks) else {}
    for check in checks:
        kind = check.kind
        if kind == _JOBS:
            if usage is not None and usage.counter(*check.counter).running_jobs + 1 > check.limit:
                yield check.reason
        elif kind == _WALL:
            if job.time_limit_minutes is None or job.time_limit_minutes > check.limit:
                yield check.reason
        elif kind == _TRES:
            used = usage.counter(*check.counter).running_tres.get(check.name, 0) if (
                usage is not None and check.counter) else 0
            if _over(used, tres.get(check.name, 0), check.limit):
                yield check.reason
        elif kind == _PER_NODE:
            if per_node.get(check.name, 0) > check.limit:
                yield check.reason
        elif kind == _MINUTES:
            if _minutes_over(check, tres.get(check.name, 0), job.time_limit_minutes, context.config.enforces_safe):
                yield check.reason
        elif kind == _JOB_MINUTES:
            requested = tres.get(check.name, 0)
            if requested and (job.time_limit_minutes is None or job.time_limit_minutes * requested > check.limit):
                yield check.reason
        elif tres.get(check.name, 0) < check.limit:
            yield check.reason


def _minutes_over(check: _Check, requested: int, time_limit_minutes: int | None, safe: bool) -> bool:
    """GrpTRESMins against a job requesting ``requested`` of the TRES (``_validate_tres_usage_limits``:
    usage at or over the limit; with safe limits, a request of time limit x count that does not fit in
    what is left -- a job without a time limit never does)."""
    if not requested:
        return False
    if check.used >= check.limit:
        return True
    if not safe:
        return False
    return time_limit_minutes is None or time_limit_minutes * requested > check.limit - check.used


def tres_minutes_exhausted(context: LimitContext, job: JobRequest, allocated: Mapping[str, int]) -> str | None:
    """Why a running job is stopped as TIMEOUT (``acct_policy_job_time_out``): its QOS, or an
    association above the user's, not the root, whose usage reached its GrpTRESMins of a TRES the job holds.
    Only with ``limits`` enforced and not ``safe`` (safe never starts a job that could reach it)."""
    config = context.config
    if not config.enforces_limits or config.enforces_safe:
        return None
    grp_minutes = _QosLimits(tuple(context.job_qos_order(job))).tres("grp_tres_mins")
    for name in _ordered(grp_minutes):
        qos, limit = grp_minutes[name]
        used = qos.used_tres_minutes.get(name, 0)
        if allocated.get(name, 0) and used >= limit:
            return f"Job is at or exceeds QOS {qos.name}'s group max TRES({name}) minutes of {limit} with {used}"
    for assoc in context.chain(job.assoc_key):
        if assoc.parent is None:
            break
        for name in _ordered(assoc.grp_tres_mins):
            used, limit = assoc.used_tres_minutes.get(name, 0), assoc.grp_tres_mins[name]
            if allocated.get(name, 0) and used >= limit:
                return (f"Job is at or exceeds association (acc={assoc.account}/user={assoc.user or '(null)'}/"
                        f"part={assoc.partition or '(null)'}) group max TRES({name}) minutes of {limit} with {used}")
    return None


def limit_reason(context: LimitContext, usage: LimitUsage, job: JobRequest) -> str | None:
    """The reason association/QOS limits keep a pending job waiting, or None (only with ``limits``)."""
    if not context.config.enforces_limits:
        return None
    return next(iter(_limit_reasons(context, job, usage)), None)


def max_nodes(context: LimitContext, job: JobRequest) -> int | None:
    """The most nodes the association and QOS limits let ``job`` have, whatever runs
    (acct_policy_get_max_nodes: the node count of their GrpTRES, MaxTRESPerUser and MaxTRESPerJob),
    None without any; slurmctld's select_nodes caps a node range's MAX at it."""
    if not context.config.enforces_limits:
        return None
    return min((check.limit for check in context.checks(job) if check.kind == _TRES and check.name == "node"),
               default=None)


def _strict(qos_order: list[QosRecord], job: JobRequest) -> bool:
    return job.qos is None or any(qos.has_flag("DenyOnLimit") for qos in qos_order)


def _resolve_time_limit(context: LimitContext, job: JobRequest, partition: PartitionOptions) -> int | None:
    """Partition DefaultTime, else the applying MaxWall (QOS first), else the partition MaxTime."""
    if job.time_limit_minutes is not None:
        return job.time_limit_minutes
    if partition.default_time_minutes is not None:
        return partition.default_time_minutes
    if context.config.enforces_limits:
        wall = _QosLimits(tuple(context.job_qos_order(job))).first("max_wall_minutes")
        limit = wall[1] if wall else _inherited(context.chain(job.assoc_key), "max_wall_minutes")
        if limit is not None:
            return min(limit, partition.max_time_minutes) if partition.max_time_minutes is not None else limit
    return partition.max_time_minutes


def partition_limit(partition: PartitionOptions, *, nodes: int, time_limit_minutes: int | None,
                    partition_nodes: int | None = None, most_nodes: int = 0, from_tasks: bool = False) -> str | None:
    """The partition limit a job is over, nodes before time: PartitionNodeLimit where ``nodes`` (-N's count) is more
    than the partition's ``partition_nodes`` (_part_access_check's "too many nodes") or it or a range's MAX
    ``most_nodes`` is over MaxNodes, else PartitionTimeLimit where the time limit is over MaxTime, else None.
    This is the one place that decides "more nodes than the partition has".
    A count from -n alone (``from_tasks``) is no node limit, neither the partition's nodes (fixtures/22.05/ntasks)
    nor MaxNodes, as slurmctld was recorded to weigh it (fixtures/22.05/part-edge: with MaxNodes=2 MaxTime=5,
    ``-n 40 -t 10``, 3 nodes of 16 CPUs, pends with PartitionTimeLimit after the main scheduler's run). Nor is a
    constraint's counts: ``nodes`` is -N's count before them (part-edge: ``-C a100*5`` on 4 nodes is refused as
    no node configuration, under EnforcePartLimits=NO and ALL: a100x5, all-a100x5).
    The order is the one slurmctld was recorded to follow (job_mgr.c: _part_access_check's and _valid_job_part's
    refusals under EnforcePartLimits, job_limits_check's reasons otherwise; fixtures/22.05/part-order:
    with MaxNodes=2 MaxTime=5 on 4 nodes, ``-N 3 -t 10`` and ``-N 5 -t 10`` pend with PartitionNodeLimit under
    EnforcePartLimits=NO and are refused as ``Node count specification invalid`` under ALL; with MaxNodes
    unset, ``-N 5 -t 10`` the same: nomax-N5-t10, all-nomax-N5-t10)."""
    if not from_tasks and ((partition_nodes is not None and nodes > partition_nodes) or (
            partition.max_nodes is not None and max(nodes, most_nodes) > partition.max_nodes)):
        return "PartitionNodeLimit"
    if partition.max_time_minutes is not None and (
            time_limit_minutes is None or time_limit_minutes > partition.max_time_minutes):
        return "PartitionTimeLimit"
    return None


def _partition_reason(config: SlurmConfig, partition: PartitionOptions, job: JobRequest, *,
                      most_nodes: int = 0, partition_nodes: int | None = None, from_tasks: bool = False,
                      partition_cpus: int | None = None) -> str | None:
    """Why the partition keeps the job waiting, or raises SubmitRejected where EnforcePartLimits refuses it
    (partition_limit: nodes, then time). ``most_nodes``: a node range's MAX, which _part_access_check holds
    against MaxNodes as it does MIN (job_mgr.c: ``job_desc->max_nodes > part_ptr->max_nodes``;
    fixtures/22.05/job-records: under EnforcePartLimits=ALL and ANY with MaxNodes=2 ``-N 1-4`` and ``-N 2-4``
    are refused as ``-N 3`` is, ``Node count specification invalid``, and ``-N 1-2`` runs on 2).
    A DOWN partition: at submission (job_allocate's job_limits_check) slurmctld was recorded to weigh the node
    limits before the partition's state and its state before the time limit (fixtures/22.05/part-order: on a DOWN batch of
    MaxNodes=2 MaxTime=5, ``-t 10`` pends with PartitionDown at once, ``-N 3`` and ``-N 5`` with PartitionConfig,
    as a job over the node limit does).
    Under EnforcePartLimits other than NO a job asking more CPUs than the partition's ``partition_cpus`` is refused
    first, as _part_access_check tests the CPUs before the node counts and the time (fixtures/22.05/part-more: under
    ALL with MaxNodes=2 MaxTime=5, ``-n 65 -t 10`` on 4 nodes of 16 CPUs is refused as ``More processors requested
    than permitted``, ``-n 40 -t 10`` as ``Requested time limit is invalid``); under NO such a job pends with
    PartitionConfig (fixtures/22.05/part-edge n65-t10, ntasks ``-n 65``: the scheduler's _static_reason)."""
    if partition.state in ("DRAIN", "INACTIVE"):
        raise SubmitRejected(PARTITION_NOT_AVAIL)
    if (config.enforce_part_limits != "NO" and partition_cpus is not None
            and job.tres.get("cpu", 0) > partition_cpus):
        raise SubmitRejected(TOO_MANY_CPUS)
    limit = partition_limit(partition, nodes=job.nodes, time_limit_minutes=job.time_limit_minutes,
                            partition_nodes=partition_nodes, most_nodes=most_nodes, from_tasks=from_tasks)
    if limit and config.enforce_part_limits != "NO":
        raise SubmitRejected(INVALID_NODE_COUNT if limit == "PartitionNodeLimit" else INVALID_TIME_LIMIT, limit)
    if partition.state == "DOWN" and limit != "PartitionNodeLimit":
        return "PartitionDown"
    return limit


#: What job_limits_check gives a job its partition's limits keep waiting (_part_access_check's
#: ESLURM_INVALID_TIME_LIMIT and ESLURM_INVALID_NODE_COUNT under EnforcePartLimits=NO).
_PARTITION_LIMITS = frozenset({"PartitionTimeLimit", "PartitionNodeLimit"})


def over_partition_limits(reason: str | None) -> bool:
    """Whether a job pending with ``reason`` is over its partition's time or node limit (partition_limit,
    -N over its nodes too). slurmctld gives such a job PartitionConfig at submission (job_allocate's
    _select_nodes_parts: job_limits_check fails, so ESLURM_REQUESTED_PART_CONFIG_UNAVAILABLE, WAIT_PART_CONFIG),
    over the BeginTime or Dependency job_independent gave it just before, but not a user hold (job_allocate
    restores WAIT_HELD_USER); the first queue build keeps that for accounting (scheduler.reason_prev_db) and
    gives the job its limit's reason (fixtures/22.05/part-reason: ``-N 5`` on 4 nodes, ``-N 5 -d afterok:1``,
    ``-N 3`` and ``-N 1-4`` under MaxNodes=2, ``-N 5 --begin=now+600``, ``-t 10`` under MaxTime=5 show
    PartitionConfig in squeue and scontrol until the main scheduler's run after their submission; ``-N 5 -H``
    JobHeldUser)."""
    return reason in _PARTITION_LIMITS


def validate_submission(context: LimitContext, usage: LimitUsage, *, user: str, account: str | None,
                        partition: str, qos: str | None, nodes: int, tres: Mapping[str, int],
                        time_limit_minutes: int | None, default_account: str | None,
                        most_nodes: int = 0, partition_nodes: int | None = None,
                        from_tasks: bool = False, partition_cpus: int | None = None) -> Submission:
    """Accept a job as slurmctld would, or raise :class:`SubmitRejected` with Slurm's message.

    ``partition`` must be a partition of the cluster (the caller reports unknown partitions);
    ``most_nodes``: -N MIN-MAX's MAX (0: ``nodes`` alone); ``partition_nodes``: the partition's node count,
    which ``nodes`` must not exceed unless ``from_tasks`` (a count from -n alone: partition_limit);
    ``partition_cpus``: the partition's CPUs, which the job's ``cpu`` TRES must not exceed under EnforcePartLimits.
    The association and QOS are validated before the partition's limits, as _job_create validates them
    before _valid_job_part (fixtures/22.05/part-order: under EnforcePartLimits=ALL, ``-N 5 -A nosuchacct``
    on 4 nodes is refused as ``Invalid account or account/partition combination specified``, ``-N 5
    --qos=nosuchqos`` as ``Invalid qos specification``), and the partition's limits before the nodes' features,
    which the caller tests after this (fixtures/22.05/part-edge: with MaxNodes=2 MaxTime=5, ``-N 5 -C bogus`` and
    ``-N 3 -C bogus`` are refused as ``Node count specification invalid``, ``-t 10 -C bogus`` as ``Requested time
    limit is invalid``; batch DOWN, ``-t 10`` and ``-N 3`` are refused so too, ``-N 1 -t 1`` pends PartitionDown).
    """
    config = context.config
    partition_options = context.partitions[partition]
    account = account or default_account or ""
    assoc = context.find_association(user, account, partition) if account else None
    if config.enforces_associations and assoc is None:
        raise SubmitRejected(INVALID_ACCOUNT)
    if partition_options.allow_accounts and account not in partition_options.allow_accounts:
        raise SubmitRejected(INVALID_ACCOUNT)
    assoc_key = assoc.key if assoc else None
    job_qos = qos or (context.default_qos(assoc_key) if assoc_key or config.enforces_qos else None)
    if job_qos is not None and job_qos not in context.qos:
        if config.enforces_qos:
            raise SubmitRejected(INVALID_QOS)
        job_qos = None
    if config.enforces_qos and assoc_key and job_qos not in context.allowed_qos(assoc_key):
        raise SubmitRejected(INVALID_QOS)
    if partition_options.allow_qos and job_qos not in partition_options.allow_qos:
        raise SubmitRejected(INVALID_QOS)
    job = JobRequest(user=user, account=account, partition=partition, qos=job_qos, assoc_key=assoc_key,
                     nodes=nodes, tres=dict(tres), time_limit_minutes=time_limit_minutes)
    job = replace(job, time_limit_minutes=_resolve_time_limit(context, job, partition_options))
    reason = _partition_reason(config, partition_options, job, most_nodes=most_nodes,
                               partition_nodes=partition_nodes, from_tasks=from_tasks, partition_cpus=partition_cpus)
    if config.enforces_limits:
        submit_reason = _submit_count_reason(context, usage, job)
        if submit_reason:
            raise SubmitRejected(ACCOUNTING_POLICY, submit_reason)
        alone = next(iter(_limit_reasons(context, job, None)), None)
        if alone and _strict(context.job_qos_order(job), job):
            raise SubmitRejected(ACCOUNTING_POLICY, alone)
        reason = reason or alone
    return Submission(assoc_key=assoc_key, account=account, qos=job_qos,
                      time_limit_minutes=job.time_limit_minutes, pending_reason=reason)
