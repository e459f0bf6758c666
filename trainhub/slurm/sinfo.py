"""What sinfo prints (default, ``-s``, ``-R``, ``-N``, ``-N -l``), as Slurm 22.05 lays it out
(fixtures/22.05/scenario/sinfo-*.txt). Pure Python.

Node states as Slurm names them: long (``%T``) idle, mixed, allocated, drained, draining, down,
down* (not responding), compact (``%t``) idle, mix, alloc, drain, drng, down, down*. With CR_CPU a
node is allocated when all its CPUs are, mixed when some are. Rows of a partition come in
descending state order (sinfo's default sort ``#P,-t``: Slurm's state numbers, DRAIN a flag above them).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from trainhub.slurm.hostlist import compress
from trainhub.slurm.timefmt import format_time_limit

__all__ = ["SinfoNode", "SinfoPartition", "node_state", "sinfo_rows", "sinfo_text"]

COMPACT = {"idle": "idle", "mixed": "mix", "allocated": "alloc", "drained": "drain", "draining": "drng",
           "down": "down", "down*": "down*"}
#: slurm.h's node_states numbers with the DRAIN (0x200) and NO_RESPOND (0x800) flags.
_SORT = {"idle": 2, "mixed": 5, "allocated": 3, "drained": 0x202, "draining": 0x203, "down": 1, "down*": 0x801}
_OTHER = frozenset({"drained", "draining", "down", "down*"})


@dataclass(frozen=True)
class SinfoNode:
    name: str
    state: str
    cpus: int
    memory_mb: int
    reason: str = ""
    reason_user: str = ""
    reason_time: dt.datetime | None = None
    available_features: tuple[str, ...] = ()
    active_features: tuple[str, ...] = ()

    @property
    def avail_fe(self) -> str:
        """sinfo's AVAIL_FE (``%f``): ``a100,ib``, ``(null)`` for none."""
        return ",".join(self.available_features) or "(null)"


@dataclass(frozen=True)
class SinfoPartition:
    name: str
    default: bool
    #: up, down, inact or drain
    avail: str
    time_limit_minutes: int | None
    nodes: tuple[SinfoNode, ...]


def node_state(*, responding: bool, drain: bool, down: bool, allocated_cpus: int, cpus: int) -> str:
    """A node's long state name."""
    if down:
        return "down"
    if not responding:
        return "down*"
    if drain:
        return "draining" if allocated_cpus else "drained"
    if not allocated_cpus:
        return "idle"
    return "allocated" if allocated_cpus >= cpus else "mixed"


def _partition_cell(partition: SinfoPartition) -> str:
    return partition.name + ("*" if partition.default else "")


def _limit(partition: SinfoPartition) -> str:
    return "infinite" if partition.time_limit_minutes is None else format_time_limit(partition.time_limit_minutes)


def _head(partition: SinfoPartition) -> str:
    return f"{_partition_cell(partition):<9.9} {partition.avail:>5.5} {_limit(partition):>10.10}"


def _by_state(nodes: Sequence[SinfoNode]) -> list[tuple[str, list[SinfoNode]]]:
    groups: dict[str, list[SinfoNode]] = {}
    for node in nodes:
        groups.setdefault(node.state, []).append(node)
    return sorted(groups.items(), key=lambda item: -_SORT.get(item[0], 0))


def _default(partitions: Sequence[SinfoPartition]) -> list[str]:
    lines = ["PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST"]
    for partition in partitions:
        for state, nodes in _by_state(partition.nodes):
            lines.append(f"{_head(partition)} {len(nodes):>6} {COMPACT.get(state, state):>6.6} "
                         f"{compress(n.name for n in nodes)}")
    return lines


def _summary(partitions: Sequence[SinfoPartition]) -> list[str]:
    lines = ["PARTITION AVAIL  TIMELIMIT   NODES(A/I/O/T) NODELIST"]
    for partition in partitions:
        states = [node.state for node in partition.nodes]
        counts = (sum(s in ("mixed", "allocated") for s in states), states.count("idle"),
                  sum(s in _OTHER for s in states), len(states))
        lines.append(f"{_head(partition)} {'/'.join(map(str, counts)):>16} "
                     f"{compress(n.name for n in partition.nodes)}")
    return lines


def _reasons(partitions: Sequence[SinfoPartition]) -> list[str]:
    lines = ["REASON               USER      TIMESTAMP           NODELIST"]
    nodes = {node.name: node for partition in partitions for node in partition.nodes if node.reason}
    groups: dict[tuple[str, str, str, str], list[str]] = {}
    for node in sorted(nodes.values(), key=lambda n: -_SORT.get(n.state, 0)):
        stamp = node.reason_time.strftime("%Y-%m-%dT%H:%M:%S") if node.reason_time else "Unknown"
        groups.setdefault((node.state, node.reason, node.reason_user, stamp), []).append(node.name)
    for (_, reason, user, stamp), names in groups.items():
        lines.append(f"{reason:<20.20} {user:<9.9} {stamp:<19} {compress(names)}")
    return lines


def _node_lines(partitions: Sequence[SinfoPartition], long: bool) -> list[str]:
    rows = sorted(((node, partition) for partition in partitions for node in partition.nodes),
                  key=lambda pair: pair[0].name)  # stable: a node's partitions stay in cluster order
    width = max([9, *(len(node.name) for node, _ in rows)])
    if not long:
        lines = [f"{'NODELIST':<{width}} NODES PARTITION STATE "]
        return lines + [f"{node.name:<{width}} {1:>6} {_partition_cell(partition):<9.9} "
                        f"{COMPACT.get(node.state, node.state):<6.6}" for node, partition in rows]
    lines = [f"{'NODELIST':<{width}}  NODES PARTITION       STATE CPUS    S:C:T MEMORY TMP_DISK WEIGHT AVAIL_FE "
             f"{'REASON':<20}"]
    for node, partition in rows:
        lines.append(f"{node.name:<{width}} {1:>6} {_partition_cell(partition):>9.9} {node.state:>11.11} "
                     f"{node.cpus:<4} {f'{node.cpus}:1:1':>8} {node.memory_mb:>6} {0:>8} {1:>6} {node.avail_fe:>8.8} "
                     f"{node.reason or 'none':<20.20}")
    return lines


def sinfo_text(partitions: Sequence[SinfoPartition], *, now: dt.datetime, node_oriented: bool = False,
               long: bool = False, summarize: bool = False, reasons: bool = False) -> str:
    """sinfo's output; ``partitions`` in the cluster's order, each with its nodes."""
    if reasons:
        lines = _reasons(partitions)
    elif summarize:
        lines = _summary(partitions)
    elif node_oriented:
        lines = _node_lines(partitions, long)
        if long:
            lines.insert(0, now.strftime("%a %b %d %H:%M:%S %Y"))
    else:
        lines = _default(partitions)
    return "\n".join(lines) + "\n"


def sinfo_rows(partitions: Sequence[SinfoPartition]) -> list[dict]:
    """One JSON row per (partition, node)."""
    return [{"partition": partition.name, "default": partition.default, "avail": partition.avail,
             "timeLimit": _limit(partition), "node": node.name, "state": node.state,
             "stateCompact": COMPACT.get(node.state, node.state), "cpus": node.cpus, "memoryMb": node.memory_mb,
             "reason": node.reason, "availableFeatures": list(node.available_features),
             "activeFeatures": list(node.active_features)} for partition in partitions for node in partition.nodes]
