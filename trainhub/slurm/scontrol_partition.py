"""``scontrol show partition`` as Slurm 22.05 prints it (pure Python, no Django).

The layout is slurm:src/api/partition_info.c ``slurm_sprint_partition_info``, checked against
fixtures/22.05/partition (the harness's two partitions as start.sh makes them, then with every
PartitionName= option trainhub supports set). Options trainhub does not offer print Slurm's
defaults: AllowGroups and AllocNodes ALL, MinNodes 0, no OverTimeLimit, no per-partition memory
defaults or SelectTypeParameters (a cluster-wide DefMemPerCPU does not show here either: 22.05
prints the partition's own, UNLIMITED). A partition without PreemptMode= prints the cluster's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from trainhub.slurm.conf import PartitionOptions
from trainhub.slurm.scontrol_job import limit_text, tres_text
from trainhub.slurm.tres import billable_tres


@dataclass(frozen=True)
class ScontrolPartition:
    name: str
    default: bool
    options: PartitionOptions
    #: the partition's nodes as a hostlist expression ("" when it has none)
    nodes: str
    #: cpu, mem (MB), node and gres/gpu of its nodes together
    totals: dict[str, int]
    #: the cluster's PreemptMode (OFF, CANCEL or REQUEUE), for a partition that sets none
    cluster_preempt_mode: str
    #: PriorityFlags=MAX_TRES
    max_tres: bool = False

    @property
    def billing(self) -> int:
        """The TRES billing of the partition's whole resources (slurmctld's set_partition_tres:
        assoc_mgr_tres_weighted, truncated to an integer; the CPU count without weights)."""
        return int(billable_tres(self.totals, self.options.billing_weights, max_tres=self.max_tres))


def _names(names: Sequence[str]) -> str:
    return ",".join(names) if names else "ALL"


def _fields(partition: ScontrolPartition) -> list[list[str]]:
    """The record's lines, each a list of ``Key=value`` words."""
    options, totals = partition.options, partition.totals
    lines = [
        [f"PartitionName={partition.name}"],
        ["AllowGroups=ALL", f"AllowAccounts={_names(options.allow_accounts)}", f"AllowQos={_names(options.allow_qos)}"],
        ["AllocNodes=ALL", f"Default={'YES' if partition.default else 'NO'}", f"QoS={options.qos or 'N/A'}"],
        [f"DefaultTime={'NONE' if options.default_time_minutes is None else limit_text(options.default_time_minutes)}",
         "DisableRootJobs=NO", "ExclusiveUser=NO", f"GraceTime={options.grace_time}", "Hidden=NO"],
        [f"MaxNodes={'UNLIMITED' if options.max_nodes is None else options.max_nodes}",
         f"MaxTime={limit_text(options.max_time_minutes)}", "MinNodes=0", "LLN=NO", "MaxCPUsPerNode=UNLIMITED"],
        [f"Nodes={partition.nodes or '(null)'}"],
        [f"PriorityJobFactor={options.priority_job_factor}", f"PriorityTier={options.priority_tier}", "RootOnly=NO",
         "ReqResv=NO", "OverSubscribe=NO"],
        ["OverTimeLimit=NONE", f"PreemptMode={options.preempt_mode or partition.cluster_preempt_mode}"],
        [f"State={options.state}", f"TotalCPUs={totals.get('cpu', 0)}", f"TotalNodes={totals.get('node', 0)}",
         "SelectTypeParameters=NONE"],
        ["JobDefaults=(null)"],
        ["DefMemPerNode=UNLIMITED", "MaxMemPerNode=UNLIMITED"],
        [f"TRES={tres_text(cpus=totals.get('cpu', 0), mem_mb=totals.get('mem', 0), nodes=totals.get('node', 0), billing=partition.billing, gpus=totals.get('gres/gpu', 0))}"],
    ]
    if options.tres_billing_weights:
        lines.append([f"TRESBillingWeights={options.tres_billing_weights}"])
    return lines


def scontrol_partition_text(partitions: Sequence[ScontrolPartition], *, asked: str = "",
                            one_liner: bool = False) -> str:
    """Every record as scontrol prints it: a block of lines indented by three blanks and a blank line
    after each, or with ``one_liner`` (-o) one line per partition. None found: ``Partition NAME not
    found`` for an ``asked`` name (scontrol exits 1), else ``No partitions in the system``."""
    if not partitions:
        return f"Partition {asked} not found\n" if asked else "No partitions in the system\n"
    if one_liner:
        return "".join(" ".join(word for line in _fields(p) for word in line) + "\n" for p in partitions)
    return "".join("\n   ".join(" ".join(line) for line in _fields(p)) + "\n\n" for p in partitions)


def scontrol_partition_rows(partitions: Iterable[ScontrolPartition]) -> list[dict[str, Any]]:
    """The records as JSON rows: every field by scontrol's name, as printed."""
    return [{word.split("=", 1)[0]: word.split("=", 1)[1] for line in _fields(p) for word in line} for p in partitions]
