"""slurm.conf for trainhub clusters: the keys a cluster spec's ``config {key: value}`` may set, their
types, defaults and validation, the typed :class:`SlurmConfig`, and rendering of the slurm.conf text.

Public API (pure Python, no Django)::

    CATALOGUE: dict[str, ConfigKey]          # canonical key name -> ConfigKey(name, kind, default, description)
    parse_config(values: Mapping[str, object]) -> SlurmConfig
        # keys match case-insensitively (as slurm.conf does); values are strings (JSON numbers and, for
        # YES/NO keys, booleans are accepted too). Raises ConfigError listing EVERY bad key at once:
        #   ConfigError.violations: list[ConfigViolation(key, description)]   (key = as the client wrote it)
    SlurmConfig                              # typed values (durations in SECONDS, memory in MB) plus
        .explicit: dict[str, str]            # the keys the spec set, canonical name -> value as written
        .with_changes(changes) -> SlurmConfig   # an admin's edit of a running cluster (None value = unset)
    parse_partition_options(values) -> PartitionOptions    # PriorityTier, PriorityJobFactor, MaxTime, ...
    NodeSpec, PartitionSpec, ClusterLayout   # what the app passes to render
    render_slurm_conf(layout: ClusterLayout, config: SlurmConfig) -> str
    script_file_names(kind: str, count: int) -> list[str]  # prolog.d / epilog.d file names, run in list order
    PROLOG_DIR, EPILOG_DIR

Sources: slurm.conf.5 and slurm:src/common/read_config.c / read_config.h for defaults, ranges and
the cross-key rules; reference sections 1.3, 1.4, 4.1, 5.1 and 7.
Notes where trainhub follows its own product rules (the seed: "Slurm accounting is enabled on every
cluster") or is stricter than slurmctld:

- ``AccountingStorageType`` can only be ``accounting_storage/slurmdbd`` (accounting is always on), so
  PriorityWeightAge/Fairshare are never forced to 0 as slurmctld does without SlurmDBD.
- ``AccountingStorageTRES`` defaults to ``gres/gpu`` (GPU clusters need it for GrpTRES=gres/gpu=..
  and GRES usage); Slurm's built-in list (cpu, mem, energy, node, billing, fs/disk, vmem, pages)
  is always tracked.
- ``PreemptMode`` SUSPEND and GANG are rejected: trainhub's node agent cannot suspend a job or
  time-slice nodes. OFF, CANCEL, REQUEUE (+ PRIORITY, WITHIN) are supported.
- ``PriorityFlags`` DEPTH_OBLIVIOUS and MAX_TRES_GRES are rejected (not implemented); every other
  flag of slurm.conf.5 is honoured.
- Unknown ``SchedulerParameters`` options are rejected (slurmctld ignores them silently), so a typo
  is reported instead of having no effect.
- Keys trainhub owns (ClusterName, SlurmctldHost, NodeName, PartitionName, Prolog, Epilog, paths,
  ports, plugins for auth/proctrack/...) are refused with "set by trainhub".
- ``PriorityType`` defaults to priority/multifactor, as in current Slurm (read_config.h); older
  releases defaulted to priority/basic.

Prolog/Epilog: each cluster's scripts are installed as files in ``PROLOG_DIR``/``EPILOG_DIR`` and
slurm.conf says ``Prolog=/etc/slurm/prolog.d/*``. Slurm runs several scripts matched by a glob "in
reverse alphabetical order" (prolog_epilog.shtml), so :func:`script_file_names` numbers them so
that the first script of the spec sorts last alphabetically and therefore runs first.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from trainhub.slurm.hostlist import compress
from trainhub.slurm.timefmt import TimeFormatError, format_mins, parse_minutes, parse_seconds
from trainhub.slurm.tres import (
    GresRequest,
    TresFormatError,
    parse_billing_weights,
    parse_memory_mb,
    parse_tres,
)

__all__ = [
    "CATALOGUE",
    "DEFAULT_NODE_WEIGHT",
    "EPILOG_DIR",
    "NODE_WEIGHT_MAX",
    "PROLOG_DIR",
    "ClusterLayout",
    "ConfigError",
    "ConfigKey",
    "ConfigViolation",
    "NodeSpec",
    "PartitionOptions",
    "PartitionSpec",
    "SchedulerParameters",
    "SlurmConfig",
    "parse_config",
    "parse_partition_options",
    "render_slurm_conf",
    "script_file_names",
]

PROLOG_DIR = "/etc/slurm/prolog.d"
EPILOG_DIR = "/etc/slurm/epilog.d"
UINT32_MAX = 4_294_967_295
#: Partition PriorityTier / PriorityJobFactor range (slurm.conf.5: "0 to 65533").
PARTITION_PRIORITY_MAX = 65_533
#: A node's Weight= unless set (slurm.conf.5: "The default value is 1").
DEFAULT_NODE_WEIGHT = 1
#: The largest node Weight= (read_config.c lowers INFINITE, 2^32-1, to this).
NODE_WEIGHT_MAX = UINT32_MAX - 1


# --- errors -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class ConfigViolation:
    """One bad key: ``key`` as the client spelled it, ``description`` says why."""

    key: str
    description: str


class ConfigError(ValueError):
    """Every bad key of a config map or partition option map (the app answers 400 with them)."""

    def __init__(self, violations: list[ConfigViolation]):
        self.violations = violations
        super().__init__("; ".join(f"{v.key}: {v.description}" for v in violations))


class _Invalid(ValueError):
    """A value rejected by a key's parser; the message becomes the violation's description."""


# --- value parsers ------------------------------------------------------------------------------

def _text(value: object, *, allow_bool: bool = False) -> str:
    if isinstance(value, bool):
        if allow_bool:
            return "YES" if value else "NO"
        raise _Invalid("must be a string, not a boolean")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if not isinstance(value, str):
        raise _Invalid(f"must be a string, got {type(value).__name__}")
    if "\n" in value or "\r" in value:
        raise _Invalid("must be a single line")
    return value.strip()


def _integer(minimum: int, maximum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        if not re.fullmatch(r"-?\d+", text):
            raise _Invalid(f"must be an integer, got {text!r}")
        number = int(text)
        if not minimum <= number <= maximum:
            raise _Invalid(f"must be between {minimum} and {maximum}, got {number}")
        return number
    return parse


def _minutes_as_seconds(text: str) -> int:
    """time_str2mins, stored in seconds; UNLIMITED is not meaningful for these keys."""
    try:
        minutes = parse_minutes(text)
    except TimeFormatError as exc:
        raise _Invalid(str(exc)) from None
    if minutes is None:
        raise _Invalid("must be a time such as 7-0 or 14-0, not UNLIMITED")
    return minutes * 60


def _calc_period(text: str) -> int:
    seconds = _minutes_as_seconds(text)
    if seconds <= 0:
        raise _Invalid("must be at least one minute")
    return seconds


def _optional_seconds(text: str) -> int | None:
    """time_str2secs; ``-1``/UNLIMITED/INFINITE = not set."""
    try:
        return parse_seconds(text)
    except TimeFormatError as exc:
        raise _Invalid(str(exc)) from None


def _choice(*choices: str) -> Callable[[str], str]:
    by_lower = {choice.lower(): choice for choice in choices}

    def parse(text: str) -> str:
        if text.lower() not in by_lower:
            raise _Invalid(f"must be one of {', '.join(choices)}; got {text!r}")
        return by_lower[text.lower()]
    return parse


def _yes_no(text: str) -> bool:
    upper = text.upper()
    if upper in ("YES", "Y", "1", "TRUE"):
        return True
    if upper in ("NO", "N", "0", "FALSE"):
        return False
    raise _Invalid(f"must be YES or NO, got {text!r}")


def _flags(allowed: Iterable[str], *, unsupported: Mapping[str, str] | None = None) -> Callable[[str], frozenset[str]]:
    canonical = {flag.lower(): flag for flag in allowed}
    refused = {key.lower(): why for key, why in (unsupported or {}).items()}

    def parse(text: str) -> frozenset[str]:
        if not text:
            return frozenset()
        flags = set()
        for raw in text.split(","):
            flag = raw.strip().lower()
            if flag in refused:
                raise _Invalid(refused[flag])
            if flag not in canonical:
                raise _Invalid(f"unknown flag {raw.strip()!r}; allowed: {', '.join(sorted(canonical.values()))}")
            flags.add(canonical[flag])
        return frozenset(flags)
    return parse


def _memory(text: str) -> int:
    try:
        return parse_memory_mb(text)
    except TresFormatError as exc:
        raise _Invalid(str(exc)) from None


def _tres_names(text: str) -> tuple[str, ...]:
    if not text:
        return ()
    try:
        return tuple(parse_tres(",".join(f"{name.strip()}=1" for name in text.split(","))))
    except TresFormatError as exc:
        raise _Invalid(str(exc)) from None


def _tres_weights(text: str) -> dict[str, float]:
    """PriorityWeightTRES: ``CPU=1000,Mem=2000,GRES/gpu=3000`` (doubles, may be negative)."""
    weights: dict[str, float] = {}
    if not text:
        return weights
    for item in text.split(","):
        name, equals, number = item.partition("=")
        if not equals or not re.fullmatch(r"-?(\d+\.?\d*|\.\d+)", number.strip()):
            raise _Invalid(f"invalid TRES weight {item.strip()!r}: use TRES=number, e.g. GRES/gpu=3000")
        try:
            (tres,) = parse_tres(f"{name.strip()}=1")
        except TresFormatError as exc:
            raise _Invalid(str(exc)) from None
        weights[tres] = float(number)
    return weights


# --- SchedulerParameters --------------------------------------------------------------------------

@dataclass(frozen=True)
class SchedulerParameters:
    """The SchedulerParameters options trainhub's scheduler honours, with Slurm's defaults
    (slurm:src/plugins/sched/backfill/backfill.c, slurm.conf.5; times in seconds unless named)."""

    bf_interval: int = 30
    bf_window_minutes: int = 1440
    bf_resolution: int = 60
    bf_max_job_test: int = 500
    bf_max_job_start: int = 0
    bf_max_job_part: int = 0
    bf_max_job_user: int = 0
    bf_min_age_reserve: int = 0
    bf_min_prio_reserve: int = 0
    bf_continue: bool = False
    bf_busy_nodes: bool = False
    default_queue_depth: int = 100
    partition_job_depth: int = 0
    sched_interval: int = 60
    sched_max_job_start: int = 0
    batch_sched_delay: int = 3
    nohold_on_prolog_fail: bool = False
    #: Accepted as 22.05 reads it; with it 22.05 still sent a preempted job no --signal
    #: (fixtures/22.05/mail trap-USERSIG-*.txt, signalled as trap-REQUEUE-*.txt), nor does trainhub.
    preempt_send_user_signal: bool = False


#: option -> (field, parser or None for a bare flag)
_SCHEDULER_OPTIONS: dict[str, tuple[str, Callable[[str], int] | None]] = {
    "bf_interval": ("bf_interval", _integer(-1, 10_800)),
    "bf_window": ("bf_window_minutes", _integer(1, 43_200)),
    "bf_resolution": ("bf_resolution", _integer(1, 3_600)),
    "bf_max_job_test": ("bf_max_job_test", _integer(1, 1_000_000)),
    "bf_max_job_start": ("bf_max_job_start", _integer(0, 10_000)),
    "bf_max_job_part": ("bf_max_job_part", _integer(0, 1_000_000)),
    "bf_max_job_user": ("bf_max_job_user", _integer(0, 1_000_000)),
    "bf_min_age_reserve": ("bf_min_age_reserve", _integer(0, 31_536_000)),
    "bf_min_prio_reserve": ("bf_min_prio_reserve", _integer(0, UINT32_MAX)),
    "default_queue_depth": ("default_queue_depth", _integer(1, 1_000_000)),
    "partition_job_depth": ("partition_job_depth", _integer(0, 1_000_000)),
    "sched_interval": ("sched_interval", _integer(-1, 86_400)),
    "sched_max_job_start": ("sched_max_job_start", _integer(0, 1_000_000)),
    "batch_sched_delay": ("batch_sched_delay", _integer(0, 86_400)),
    "bf_continue": ("bf_continue", None),
    "bf_busy_nodes": ("bf_busy_nodes", None),
    "nohold_on_prolog_fail": ("nohold_on_prolog_fail", None),
    "preempt_send_user_signal": ("preempt_send_user_signal", None),
}


def _scheduler_parameters(text: str) -> SchedulerParameters:
    settings: dict[str, Any] = {}
    for raw in filter(None, (item.strip() for item in text.split(","))):
        option, equals, value = raw.partition("=")
        option = option.strip().lower()
        if option not in _SCHEDULER_OPTIONS:
            raise _Invalid(f"unknown option {option!r}; supported: {', '.join(sorted(_SCHEDULER_OPTIONS))}")
        name, parse = _SCHEDULER_OPTIONS[option]
        if parse is None:
            if equals:
                raise _Invalid(f"{option} takes no value")
            settings[name] = True
        elif not equals:
            raise _Invalid(f"{option} needs a value ({option}=N)")
        else:
            try:
                settings[name] = parse(value.strip())
            except _Invalid as exc:
                raise _Invalid(f"{option}: {exc}") from None
    return SchedulerParameters(**settings)


# --- the catalogue ------------------------------------------------------------------------------

@dataclass(frozen=True)
class ConfigKey:
    """One slurm.conf key a spec may set: its canonical spelling, value kind, Slurm's default (as
    slurm.conf would spell it; "" = unset), a one-line description, and the typed field it fills."""

    name: str
    kind: str
    default: str
    description: str
    attribute: str
    parse: Callable[[str], Any] = field(repr=False, compare=False)


PRIORITY_FLAGS = ("ACCRUE_ALWAYS", "CALCULATE_RUNNING", "NO_FAIR_TREE", "INCR_ONLY", "MAX_TRES",
                  "NO_NORMAL_ALL", "NO_NORMAL_ASSOC", "NO_NORMAL_PART", "NO_NORMAL_QOS", "NO_NORMAL_TRES",
                  "SMALL_RELATIVE_TO_TIME")
_PRIORITY_UNSUPPORTED = {
    "DEPTH_OBLIVIOUS": "DEPTH_OBLIVIOUS is not supported: trainhub implements Fair Tree and classic fair-share "
                       "(NO_FAIR_TREE)",
    "MAX_TRES_GRES": "MAX_TRES_GRES is not supported (use MAX_TRES)",
}
ENFORCE_FLAGS = ("associations", "limits", "qos", "safe", "wckeys", "nojobs", "nosteps", "all")
PREEMPT_MODES = ("OFF", "CANCEL", "REQUEUE", "PRIORITY", "WITHIN")
_PREEMPT_UNSUPPORTED = {
    "SUSPEND": "SUSPEND is not supported: trainhub's node agent cannot suspend a running job "
               "(use REQUEUE or CANCEL)",
    "GANG": "GANG is not supported: trainhub does not time-slice nodes (use REQUEUE or CANCEL)",
}
PROLOG_FLAGS = ("Alloc", "Contain", "ForceRequeueOnFail", "NoHold", "Serial")
_TRAINHUB_OWNED = ("ClusterName", "SlurmctldHost", "ControlMachine", "NodeName", "PartitionName", "Prolog",
                   "Epilog", "PrologSlurmctld", "EpilogSlurmctld", "TaskProlog", "TaskEpilog", "SlurmUser",
                   "SlurmdUser", "StateSaveLocation", "SlurmdSpoolDir", "SlurmctldPort", "SlurmdPort",
                   "AuthType", "CredType", "ProctrackType", "TaskPlugin", "GresTypes", "AccountingStorageHost",
                   "AccountingStoragePort", "AccountingStorageUser", "AccountingStoragePass", "JobCompType",
                   "JobAcctGatherType", "SlurmctldLogFile", "SlurmdLogFile", "Include", "MailProg")


def _key(name: str, kind: str, default: str, description: str, attribute: str,
         parse: Callable[[str], Any]) -> ConfigKey:
    return ConfigKey(name, kind, default, description, attribute, parse)


_WEIGHT = _integer(0, UINT32_MAX)
CATALOGUE: dict[str, ConfigKey] = {key.name: key for key in (
    _key("PriorityType", "choice", "priority/multifactor",
         "priority/multifactor (the formula) or priority/basic (FIFO)", "priority_type",
         _choice("priority/multifactor", "priority/basic")),
    _key("PriorityWeightAge", "integer", "0", "weight of the age factor (0..4294967295)",
         "priority_weight_age", _WEIGHT),
    _key("PriorityWeightAssoc", "integer", "0", "weight of the association factor", "priority_weight_assoc", _WEIGHT),
    _key("PriorityWeightFairshare", "integer", "0", "weight of the fair-share factor",
         "priority_weight_fairshare", _WEIGHT),
    _key("PriorityWeightJobSize", "integer", "0", "weight of the job size factor", "priority_weight_job_size", _WEIGHT),
    _key("PriorityWeightPartition", "integer", "0", "weight of the partition factor (PriorityJobFactor)",
         "priority_weight_partition", _WEIGHT),
    _key("PriorityWeightQOS", "integer", "0", "weight of the QOS factor", "priority_weight_qos", _WEIGHT),
    _key("PriorityWeightTRES", "tres_weights", "", "TRES weights, e.g. CPU=1000,Mem=2000,GRES/gpu=3000",
         "priority_weight_tres", _tres_weights),
    _key("PriorityMaxAge", "duration", "7-0", "age at which the age factor reaches 1.0", "priority_max_age",
         _minutes_as_seconds),
    _key("PriorityDecayHalfLife", "duration", "7-0", "half-life of past usage; 0 = no decay",
         "priority_decay_half_life", _minutes_as_seconds),
    _key("PriorityCalcPeriod", "duration", "5", "how often priorities and fair-share are recomputed (minutes)",
         "priority_calc_period", _calc_period),
    _key("PriorityUsageResetPeriod", "choice", "NONE", "when all usage is reset to zero",
         "priority_usage_reset_period",
         _choice("NONE", "NOW", "DAILY", "WEEKLY", "MONTHLY", "QUARTERLY", "YEARLY")),
    _key("PriorityFavorSmall", "yes_no", "NO", "YES gives small jobs the larger job size factor",
         "priority_favor_small", _yes_no),
    _key("PriorityFlags", "flags", "", "comma list of " + ", ".join(PRIORITY_FLAGS), "priority_flags",
         _flags(PRIORITY_FLAGS, unsupported=_PRIORITY_UNSUPPORTED)),
    _key("FairShareDampeningFactor", "integer", "1", "dampens the classic fair-share curve (1..10000)",
         "fair_share_dampening_factor", _integer(1, 10_000)),
    _key("PreemptType", "choice", "preempt/none", "preempt/none, preempt/partition_prio or preempt/qos",
         "preempt_type", _choice("preempt/none", "preempt/partition_prio", "preempt/qos")),
    _key("PreemptMode", "flags", "OFF", "OFF, CANCEL or REQUEUE, optionally with PRIORITY and WITHIN",
         "preempt_mode", _flags(PREEMPT_MODES, unsupported=_PREEMPT_UNSUPPORTED)),
    _key("PreemptExemptTime", "duration", "-1", "minimum run time before a job may be preempted",
         "preempt_exempt_time", _optional_seconds),
    _key("AccountingStorageEnforce", "flags", "", "comma list of " + ", ".join(ENFORCE_FLAGS),
         "accounting_storage_enforce", _flags(ENFORCE_FLAGS)),
    _key("AccountingStorageType", "choice", "accounting_storage/slurmdbd",
         "accounting is always on in trainhub clusters", "accounting_storage_type",
         _choice("accounting_storage/slurmdbd")),
    _key("AccountingStorageTRES", "tres_list", "gres/gpu", "TRES tracked beyond Slurm's built-in ones",
         "accounting_storage_tres", _tres_names),
    _key("SchedulerType", "choice", "sched/backfill", "sched/backfill or sched/builtin (strict FIFO)",
         "scheduler_type", _choice("sched/backfill", "sched/builtin")),
    _key("SchedulerParameters", "scheduler_parameters", "", "bf_* and main scheduler options",
         "scheduler_parameters", _scheduler_parameters),
    _key("SelectType", "choice", "select/cons_tres", "select/cons_tres (share nodes by GPU/CPU/memory) or "
         "select/linear (whole nodes)", "select_type", _choice("select/cons_tres", "select/linear")),
    _key("SelectTypeParameters", "choice", "CR_Core_Memory", "consumable resources", "select_type_parameters",
         _choice("CR_CPU", "CR_CPU_Memory", "CR_Core", "CR_Core_Memory", "CR_Socket", "CR_Socket_Memory",
                 "CR_Memory")),
    _key("DefMemPerCPU", "memory", "", "default memory per allocated CPU (MB)", "def_mem_per_cpu", _memory),
    _key("DefMemPerNode", "memory", "", "default memory per allocated node (MB)", "def_mem_per_node", _memory),
    _key("DefMemPerGPU", "memory", "", "default memory per allocated GPU (MB)", "def_mem_per_gpu", _memory),
    _key("DefCpuPerGPU", "integer", "", "default CPUs per allocated GPU", "def_cpu_per_gpu", _integer(1, 65_535)),
    _key("MaxMemPerCPU", "memory", "", "maximum memory per allocated CPU (MB)", "max_mem_per_cpu", _memory),
    _key("MaxMemPerNode", "memory", "", "maximum memory per allocated node (MB)", "max_mem_per_node", _memory),
    _key("MaxJobCount", "integer", "10000", "most jobs slurmctld keeps in memory", "max_job_count",
         _integer(1, 67_043_328)),
    _key("MaxArraySize", "integer", "1001", "job array indices must be below this (0 disables arrays)",
         "max_array_size", _integer(0, 4_000_001)),
    _key("MinJobAge", "integer", "300", "seconds a finished job stays in squeue", "min_job_age",
         _integer(0, UINT32_MAX)),
    _key("JobRequeue", "integer", "1", "1: batch jobs are requeue-able by default", "job_requeue", _integer(0, 1)),
    _key("EnforcePartLimits", "choice", "NO", "reject at submit jobs over partition limits (ALL, ANY, NO)",
         "enforce_part_limits", _choice("NO", "ALL", "ANY", "YES")),
    _key("KillWait", "integer", "30", "seconds between SIGTERM and SIGKILL at time limit", "kill_wait",
         _integer(0, 65_533)),
    _key("InactiveLimit", "integer", "0", "seconds an salloc may stay silent before its allocation ends "
         "(0: trainhub's keep-alive timeout)", "inactive_limit", _integer(0, 65_533)),
    _key("OverTimeLimit", "integer", "0", "minutes a job may run over its time limit", "over_time_limit",
         _integer(0, 65_533)),
    _key("PrologFlags", "flags", "", "comma list of " + ", ".join(PROLOG_FLAGS), "prolog_flags",
         _flags(PROLOG_FLAGS)),
    _key("PrologEpilogTimeout", "integer", "", "seconds before a prolog/epilog is killed (unset = wait)",
         "prolog_epilog_timeout", _integer(1, 65_533)),
)}
_BY_LOWER = {name.lower(): key for name, key in CATALOGUE.items()}
_OWNED_LOWER = {name.lower() for name in _TRAINHUB_OWNED}


# --- the typed config ---------------------------------------------------------------------------

@dataclass(frozen=True)
class SlurmConfig:
    """A cluster's validated slurm.conf settings. Durations are in seconds, memory in MB; ``None``
    means unset (Slurm's "0 = unlimited" for memory keys, "-1" for PreemptExemptTime)."""

    priority_type: str = "priority/multifactor"
    priority_weight_age: int = 0
    priority_weight_assoc: int = 0
    priority_weight_fairshare: int = 0
    priority_weight_job_size: int = 0
    priority_weight_partition: int = 0
    priority_weight_qos: int = 0
    priority_weight_tres: dict[str, float] = field(default_factory=dict)
    priority_max_age: int = 7 * 86_400
    priority_decay_half_life: int = 7 * 86_400
    priority_calc_period: int = 300
    priority_usage_reset_period: str = "NONE"
    priority_favor_small: bool = False
    priority_flags: frozenset[str] = frozenset()
    fair_share_dampening_factor: int = 1
    preempt_type: str = "preempt/none"
    preempt_mode: frozenset[str] = frozenset({"OFF"})
    preempt_exempt_time: int | None = None
    accounting_storage_enforce: frozenset[str] = frozenset()
    accounting_storage_type: str = "accounting_storage/slurmdbd"
    accounting_storage_tres: tuple[str, ...] = ("gres/gpu",)
    scheduler_type: str = "sched/backfill"
    scheduler_parameters: SchedulerParameters = field(default_factory=SchedulerParameters)
    select_type: str = "select/cons_tres"
    select_type_parameters: str = "CR_Core_Memory"
    def_mem_per_cpu: int | None = None
    def_mem_per_node: int | None = None
    def_mem_per_gpu: int | None = None
    def_cpu_per_gpu: int | None = None
    max_mem_per_cpu: int | None = None
    max_mem_per_node: int | None = None
    max_job_count: int = 10_000
    max_array_size: int = 1001
    min_job_age: int = 300
    job_requeue: int = 1
    enforce_part_limits: str = "NO"
    kill_wait: int = 30
    inactive_limit: int = 0
    over_time_limit: int = 0
    prolog_flags: frozenset[str] = frozenset()
    prolog_epilog_timeout: int | None = None
    #: The keys the spec set, canonical name -> value as written (what slurm.conf shows).
    explicit: dict[str, str] = field(default_factory=dict)

    # Derived views the other modules read.

    @property
    def fair_tree(self) -> bool:
        """Fair Tree (the default) unless PriorityFlags=NO_FAIR_TREE."""
        return "NO_FAIR_TREE" not in self.priority_flags

    def normalises(self, factor: str) -> bool:
        """Whether ``factor`` (ASSOC, PART, QOS, TRES) is normalised (no NO_NORMAL_<factor>/NO_NORMAL_ALL)."""
        return not self.priority_flags & {"NO_NORMAL_ALL", f"NO_NORMAL_{factor}"}

    @property
    def preemption_enabled(self) -> bool:
        return self.preempt_type != "preempt/none"

    @property
    def preempt_base_mode(self) -> str:
        """OFF, CANCEL or REQUEUE (the modifiers PRIORITY and WITHIN stripped)."""
        return next((mode for mode in ("REQUEUE", "CANCEL", "OFF") if mode in self.preempt_mode), "OFF")

    @property
    def enforces_limits(self) -> bool:
        return "limits" in self.accounting_storage_enforce

    @property
    def enforces_safe(self) -> bool:
        return "safe" in self.accounting_storage_enforce

    @property
    def enforces_associations(self) -> bool:
        return "associations" in self.accounting_storage_enforce

    @property
    def enforces_qos(self) -> bool:
        return "qos" in self.accounting_storage_enforce

    @property
    def memory_is_consumable(self) -> bool:
        return self.select_type == "select/cons_tres" and self.select_type_parameters.endswith("Memory")

    def with_changes(self, changes: Mapping[str, object | None]) -> SlurmConfig:
        """The config after an admin edit: ``changes`` maps keys to new values, None removes a key
        (back to Slurm's default). Validated as a whole, like a fresh spec."""
        merged: dict[str, object] = dict(self.explicit)
        for raw_key, value in changes.items():
            key = _BY_LOWER.get(str(raw_key).strip().lower())
            name = key.name if key else str(raw_key)
            if value is None:
                merged.pop(name, None)
            else:
                merged[name] = value
        return parse_config(merged)


_IMPLIED_ENFORCE = {"limits": {"associations"}, "qos": {"associations"}, "safe": {"limits", "associations"},
                    "wckeys": {"associations"}, "nojobs": {"nosteps"},
                    "all": {"associations", "limits", "qos", "safe", "wckeys"}}


def _expand_enforce(flags: frozenset[str]) -> frozenset[str]:
    expanded = set(flags)
    for flag in flags:
        expanded |= _IMPLIED_ENFORCE.get(flag, set())
    return frozenset(expanded)


def _cross_key_violations(values: dict[str, Any], spelled: dict[str, str]) -> list[ConfigViolation]:
    """Rules between keys (read_config.c); skipped for a key whose own value was already rejected."""
    violations = []
    if "PreemptMode" not in spelled or "preempt_mode" in values:
        mode = values.get("preempt_mode", frozenset({"OFF"}))
        mode_key = spelled.get("PreemptMode", spelled.get("PreemptType", "PreemptMode"))
        base_modes = mode & {"OFF", "CANCEL", "REQUEUE"}
        preempt_type = values.get("preempt_type", "preempt/none")
        if len(base_modes) > 1:
            violations.append(ConfigViolation(mode_key, "give one of OFF, CANCEL or REQUEUE, "
                                              f"not {', '.join(sorted(base_modes))}"))
        elif not base_modes:
            violations.append(ConfigViolation(mode_key, "needs OFF, CANCEL or REQUEUE besides "
                                              + ", ".join(sorted(mode))))
        elif preempt_type != "preempt/none" and "OFF" in mode:
            violations.append(ConfigViolation(mode_key, "PreemptType and PreemptMode values incompatible: "
                                              f"{preempt_type} needs PreemptMode=REQUEUE or CANCEL"))
        elif preempt_type == "preempt/none" and mode != {"OFF"}:
            violations.append(ConfigViolation(mode_key, "PreemptType and PreemptMode values incompatible: "
                                              "set PreemptType=preempt/partition_prio or preempt/qos"))
    for first, second in (("DefMemPerCPU", "DefMemPerNode"), ("MaxMemPerCPU", "MaxMemPerNode")):
        if first in spelled and second in spelled:
            violations.append(ConfigViolation(spelled[second], f"{first} and {second} are mutually exclusive"))
    return violations


def parse_config(values: Mapping[str, object]) -> SlurmConfig:
    """Validate a cluster spec's ``config`` map into a :class:`SlurmConfig` (see module doc)."""
    if not isinstance(values, Mapping):
        raise ConfigError([ConfigViolation("config", "must be a map of slurm.conf keys to values")])
    violations: list[ConfigViolation] = []
    typed: dict[str, Any] = {}
    explicit: dict[str, str] = {}
    spelled: dict[str, str] = {}
    for raw_key, raw_value in values.items():
        key_text = str(raw_key).strip()
        key = _BY_LOWER.get(key_text.lower())
        if key is None:
            why = ("is set by trainhub and cannot be changed" if key_text.lower() in _OWNED_LOWER
                   else "is not a slurm.conf key trainhub supports")
            violations.append(ConfigViolation(key_text, why))
            continue
        if key.name in spelled:
            violations.append(ConfigViolation(key_text, f"is given twice (also as {spelled[key.name]})"))
            continue
        spelled[key.name] = key_text
        try:
            text = _text(raw_value, allow_bool=key.kind == "yes_no")
            typed[key.attribute] = key.parse(text)
        except _Invalid as exc:
            violations.append(ConfigViolation(key_text, str(exc)))
            continue
        explicit[key.name] = text
    if "accounting_storage_enforce" in typed:
        typed["accounting_storage_enforce"] = _expand_enforce(typed["accounting_storage_enforce"])
    violations.extend(_cross_key_violations(typed, spelled))
    if violations:
        raise ConfigError(violations)
    return SlurmConfig(**typed, explicit=explicit)


# --- partitions ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class PartitionOptions:
    """Per-partition slurm.conf options (PartitionName=... line); times in minutes, None = unlimited/unset."""

    priority_tier: int = 1
    priority_job_factor: int = 1
    max_time_minutes: int | None = None
    default_time_minutes: int | None = None
    max_nodes: int | None = None
    state: str = "UP"
    preempt_mode: str | None = None
    grace_time: int = 0
    tres_billing_weights: str = ""
    allow_accounts: tuple[str, ...] = ()
    allow_qos: tuple[str, ...] = ()
    qos: str | None = None

    @property
    def billing_weights(self) -> dict[str, float]:
        return parse_billing_weights(self.tres_billing_weights)


def _time_limit(text: str) -> int | None:
    try:
        return parse_minutes(text)
    except TimeFormatError as exc:
        raise _Invalid(str(exc)) from None


def _name_list(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    for name in names:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            raise _Invalid(f"invalid name {name!r}")
    return names


def _billing(text: str) -> str:
    try:
        parse_billing_weights(text)
    except TresFormatError as exc:
        raise _Invalid(str(exc)) from None
    return text


def _partition_preempt_mode(text: str) -> str:
    flags = _flags(("OFF", "CANCEL", "REQUEUE"), unsupported=_PREEMPT_UNSUPPORTED)(text)
    if len(flags) != 1:
        raise _Invalid("must be one of OFF, CANCEL or REQUEUE")
    return next(iter(flags))


_PARTITION_KEYS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "PriorityTier": ("priority_tier", _integer(0, PARTITION_PRIORITY_MAX)),
    "PriorityJobFactor": ("priority_job_factor", _integer(0, PARTITION_PRIORITY_MAX)),
    "MaxTime": ("max_time_minutes", _time_limit),
    "DefaultTime": ("default_time_minutes", _time_limit),
    "MaxNodes": ("max_nodes", lambda text: None if text.upper() in ("UNLIMITED", "INFINITE")
                 else _integer(1, UINT32_MAX)(text)),
    "State": ("state", _choice("UP", "DOWN", "DRAIN", "INACTIVE")),
    "PreemptMode": ("preempt_mode", _partition_preempt_mode),
    "GraceTime": ("grace_time", _integer(0, UINT32_MAX)),
    "TRESBillingWeights": ("tres_billing_weights", _billing),
    "AllowAccounts": ("allow_accounts", lambda text: () if text.upper() == "ALL" else _name_list(text)),
    "AllowQos": ("allow_qos", lambda text: () if text.upper() == "ALL" else _name_list(text)),
    "QOS": ("qos", lambda text: _name_list(text)[0] if text else None),
}
_PARTITION_BY_LOWER = {name.lower(): name for name in _PARTITION_KEYS}


def parse_partition_options(values: Mapping[str, object]) -> PartitionOptions:
    """Validate a partition's options (keys as in a PartitionName line, case-insensitive)."""
    violations: list[ConfigViolation] = []
    typed: dict[str, Any] = {}
    for raw_key, raw_value in values.items():
        name = _PARTITION_BY_LOWER.get(str(raw_key).strip().lower())
        if name is None:
            violations.append(ConfigViolation(str(raw_key), "is not a partition option trainhub supports; use "
                                              + ", ".join(_PARTITION_KEYS)))
            continue
        attribute, parse = _PARTITION_KEYS[name]
        try:
            typed[attribute] = parse(_text(raw_value))
        except _Invalid as exc:
            violations.append(ConfigViolation(str(raw_key), str(exc)))
    if violations:
        raise ConfigError(violations)
    return PartitionOptions(**typed)


# --- rendering ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class NodeSpec:
    """One compute node as slurm.conf describes it."""

    name: str
    cpus: int
    real_memory_mb: int
    gres: tuple[GresRequest, ...] = ()
    #: Features= (its available features; slurmctld starts with all of them active).
    features: tuple[str, ...] = ()
    #: Weight= (Slurm's default 1 is not written).
    weight: int = DEFAULT_NODE_WEIGHT


@dataclass(frozen=True)
class PartitionSpec:
    name: str
    nodes: tuple[str, ...]
    default: bool = False
    options: PartitionOptions = field(default_factory=PartitionOptions)


@dataclass(frozen=True)
class ClusterLayout:
    """What the app knows about a cluster besides its config keys."""

    name: str
    nodes: tuple[NodeSpec, ...]
    partitions: tuple[PartitionSpec, ...]
    controller_host: str = ""
    prolog_count: int = 0
    epilog_count: int = 0


def script_file_names(kind: str, count: int) -> list[str]:
    """File names for ``count`` prolog (or epilog) scripts, in the spec's order, such that Slurm's
    reverse-alphabetical execution runs them in that order: ``prolog-002.sh``, ``prolog-001.sh``."""
    if kind not in ("prolog", "epilog"):
        raise ValueError("kind must be prolog or epilog")
    return [f"{kind}-{count - index:03d}.sh" for index in range(count)]


def _node_lines(nodes: Iterable[NodeSpec]) -> list[str]:
    groups: dict[tuple[int, int, tuple[GresRequest, ...], tuple[str, ...], int], list[str]] = {}
    for node in nodes:
        groups.setdefault((node.cpus, node.real_memory_mb, node.gres, node.features, node.weight), []).append(node.name)
    lines = []
    for (cpus, memory, gres, features, weight), names in sorted(groups.items(), key=lambda item: compress(item[1])):
        line = f"NodeName={compress(names)} CPUs={cpus} RealMemory={memory}"
        if gres:
            line += " Gres=" + ",".join(str(item) for item in gres)
        if features:
            line += " Features=" + ",".join(features)
        if weight != DEFAULT_NODE_WEIGHT:
            line += f" Weight={weight}"
        lines.append(line + " State=UNKNOWN")
    return lines


def _partition_line(partition: PartitionSpec) -> str:
    options = partition.options
    parts = [f"PartitionName={partition.name}", f"Nodes={compress(partition.nodes) if partition.nodes else ''}",
             f"Default={'YES' if partition.default else 'NO'}",
             f"MaxTime={'UNLIMITED' if options.max_time_minutes is None else format_mins(options.max_time_minutes)}"]
    if options.default_time_minutes is not None:
        parts.append(f"DefaultTime={format_mins(options.default_time_minutes)}")
    if options.max_nodes is not None:
        parts.append(f"MaxNodes={options.max_nodes}")
    parts += [f"PriorityTier={options.priority_tier}", f"PriorityJobFactor={options.priority_job_factor}"]
    if options.preempt_mode:
        parts.append(f"PreemptMode={options.preempt_mode}")
    if options.grace_time:
        parts.append(f"GraceTime={options.grace_time}")
    if options.tres_billing_weights:
        parts.append(f'TRESBillingWeights="{options.tres_billing_weights}"')
    if options.allow_accounts:
        parts.append("AllowAccounts=" + ",".join(options.allow_accounts))
    if options.allow_qos:
        parts.append("AllowQos=" + ",".join(options.allow_qos))
    if options.qos:
        parts.append(f"QOS={options.qos}")
    parts.append(f"State={options.state}")
    return " ".join(parts)


def render_slurm_conf(layout: ClusterLayout, config: SlurmConfig) -> str:
    """The slurm.conf text of a cluster: managed keys, every explicitly set key, the accounting keys
    trainhub always sets, prolog/epilog globs, then NodeName and PartitionName lines."""
    lines = [f"# slurm.conf for cluster {layout.name}, generated by trainhub", f"ClusterName={layout.name}"]
    if layout.controller_host:
        lines.append(f"SlurmctldHost={layout.controller_host}")
    if any(node.gres for node in layout.nodes):
        names = sorted({item.name for node in layout.nodes for item in node.gres})
        lines.append("GresTypes=" + ",".join(names))
    lines += ["ProctrackType=proctrack/cgroup", "TaskPlugin=task/cgroup,task/affinity",
              "JobAcctGatherType=jobacct_gather/cgroup"]
    always = {"AccountingStorageType": config.accounting_storage_type,
              "AccountingStorageTRES": ",".join(config.accounting_storage_tres)}
    sections = (("# Scheduling", ("SchedulerType", "SchedulerParameters", "SelectType", "SelectTypeParameters")),
                ("# Priority", tuple(name for name in CATALOGUE if name.startswith("Priority")
                                     or name == "FairShareDampeningFactor")),
                ("# Preemption", ("PreemptType", "PreemptMode", "PreemptExemptTime")),
                ("# Accounting", ("AccountingStorageType", "AccountingStorageEnforce", "AccountingStorageTRES")))
    shown: set[str] = set()
    for title, names in sections:
        body = [f"{name}={config.explicit.get(name, always.get(name, ''))}" for name in names
                if name in config.explicit or name in always]
        shown.update(names)
        if body:
            lines += ["", title, *body]
    others = [f"{name}={value}" for name, value in config.explicit.items() if name not in shown]
    if others:
        lines += ["", "# Other settings", *others]
    scripts = [f"Prolog={PROLOG_DIR}/*"] * bool(layout.prolog_count) + [f"Epilog={EPILOG_DIR}/*"] * bool(
        layout.epilog_count)
    if scripts:
        lines += ["", "# Several scripts in one directory run in reverse alphabetical order", *scripts]
    lines += ["", "# Nodes", *_node_lines(layout.nodes), "", "# Partitions",
              *(_partition_line(partition) for partition in layout.partitions)]
    return "\n".join(lines) + "\n"
