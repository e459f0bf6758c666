"""``scontrol [-o] show node[s] [NAMES]`` in Slurm 22.05's layout (slurm:src/api/node_info.c,
slurm_sprint_node_table; fixtures/22.05/node/*.txt): every node a paragraph of lines joined by
"\\n   " and ended by a blank line; with -o one line, the same fields joined by a blank. Pure: the
fields come in a ScontrolNode.

What a trainhub node is, it prints as slurmctld does: CPUs (``Sockets=`` CPUs of one core each, as a
slurm.conf ``CPUs=`` line gives), RealMemory, Gres, features, Weight, partitions, state, reason and
what running jobs hold (CPUAlloc, AllocMem, AllocTRES). What only the real machine knows has a rule:

- ``Arch=`` and ``OS=``: what the node's agent reported (``platform.machine()``; uname's sysname,
  release and version, as slurmd sends them); a simulated node, or one whose agent did not say,
  ``x86_64`` and ``Linux``.
- ``BootTime=``: the agent's reported boot time; else (simulated) its ``SlurmdStartTime``.
- ``SlurmdStartTime=``: when its agent joined; a node that never joined, the cluster's creation.
- ``LastBusyTime=``: when it last became idle (the end of the latest job that ran on it; slurmctld's
  make_node_idle), else its SlurmdStartTime, as slurmd's registration sets it.
- ``CPULoad=N/A`` and ``FreeMem=N/A``: Slurm's own words for a load and free memory it has no
  report of (node_info.c: NO_VAL); agents do not report them.
- ``NodeAddr=`` the address its peers use (its agent's, else its hostname), ``NodeHostName=`` its
  hostname; no ``Port=`` (slurmctld prints it only for a node whose port is not SlurmdPort).
- ``Version=22.05.8``: the Slurm whose output trainhub's matches.
- ``CapWatts=n/a``, ``CurrentWatts=0 AveWatts=0`` and the ExtSensors line as a Slurm without an
  energy plugin prints them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainhub.slurm import sinfo
from trainhub.slurm.scontrol_job import memory_text
from trainhub.slurm.tres import billable_tres

#: slurmd's version in ``Version=`` (module docstring).
SLURM_VERSION = "22.05.8"
#: Arch= and OS= of a node whose agent did not report them.
DEFAULT_ARCH = "x86_64"
DEFAULT_OS = "Linux"


@dataclass(frozen=True)
class ScontrolNode:
    name: str
    cpus: int
    alloc_cpus: int
    real_memory_mb: int
    alloc_memory_mb: int
    #: slurm.conf's Gres= (``gpu:8``, ``gpu:v100:8``); "" for none ((null)).
    gres: str
    gpus: int
    alloc_gpus: int
    available_features: tuple[str, ...]
    active_features: tuple[str, ...]
    #: node_state_string_complete's (node_state below).
    state: str
    weight: int
    partitions: tuple[str, ...]
    #: "" for none; else with who set it and when.
    reason: str
    reason_user: str
    reason_time: dt.datetime | None
    node_addr: str
    hostname: str
    arch: str
    os: str
    boot_time: dt.datetime | None
    slurmd_start_time: dt.datetime | None
    last_busy_time: dt.datetime | None
    #: CfgTRES's billing (node_billing).
    billing: int


def node_state(*, responding: bool, drain: bool, down: bool, alloc_cpus: int, cpus: int) -> str:
    """State= as node_state_string_complete names it: sinfo's base state in capitals (IDLE, MIXED,
    ALLOCATED, DOWN) and its flags: ``+DRAIN`` (IDLE+DRAIN, MIXED+DRAIN: fixtures/22.05/node/later),
    ``+NOT_RESPONDING`` for sinfo's down* (a node whose agent stopped answering)."""
    base = sinfo.node_state(responding=responding, drain=False, down=down, allocated_cpus=alloc_cpus, cpus=cpus)
    text = "DOWN+NOT_RESPONDING" if base == "down*" else base.upper()
    return f"{text}+DRAIN" if drain and responding and not down else text


def _time(moment: dt.datetime | None, unset: str = "None") -> str:
    """slurm_make_time_str's form; ``unset`` what node_info.c prints for a time it has none of."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S") if moment else unset


def node_billing(tres: Mapping[str, int], partition_weights: Iterable[Mapping[str, float]], *,
                 max_tres: bool = False) -> int:
    """CfgTRES's billing: the highest weighted billing (assoc_mgr_tres_weighted, as ``scontrol show
    partition`` weighs a partition's) of the node's ``tres`` under the TRESBillingWeights of those of
    its partitions that set any, truncated; its CPUs where none does (fixtures/22.05/small-diffs:
    node-batch.txt 51 under batch's ``CPU=1.0,Mem=0.25G,GRES/gpu=4.0``, node-urgent.txt still 51
    with urgent's ``CPU=2.0``, 32, beside it, node-half.txt 8 under batch's ``CPU=0.5`` beside an
    urgent without weights)."""
    billings = [billable_tres(tres, weights, max_tres=max_tres) for weights in partition_weights if weights]
    return int(max(billings)) if billings else tres.get("cpu", 0)


def node_tres(*, cpus: int, memory_mb: int, gpus: int, billing: int | None = None) -> str:
    """CfgTRES= (with ``billing``: node_billing) and AllocTRES= in slurmctld's TRES order, cpu,
    mem, billing, gres/gpu; zero counts left out (an idle node's AllocTRES is empty)."""
    parts = [("cpu", str(cpus) if cpus else ""), ("mem", memory_text(memory_mb) if memory_mb else ""),
             ("billing", str(billing) if billing else ""), ("gres/gpu", str(gpus) if gpus else "")]
    return ",".join(f"{name}={value}" for name, value in parts if value)


def _lines(node: ScontrolNode) -> list[str]:
    """The paragraph's lines, each (but the first) as slurm_sprint_node_table starts it after its
    line_end; a line ending in a blank keeps it (``CoresPerSocket=1 ``, ``OS=Linux ... ``)."""
    lines = [f"NodeName={node.name} Arch={node.arch} CoresPerSocket=1 ",
             f"CPUAlloc={node.alloc_cpus} CPUEfctv={node.cpus} CPUTot={node.cpus} CPULoad=N/A",
             f"AvailableFeatures={','.join(node.available_features) or '(null)'}",
             f"ActiveFeatures={','.join(node.active_features) or '(null)'}",
             f"Gres={node.gres or '(null)'}",
             f"NodeAddr={node.node_addr} NodeHostName={node.hostname} Version={SLURM_VERSION}",
             f"OS={node.os} ",
             (f"RealMemory={node.real_memory_mb} AllocMem={node.alloc_memory_mb} FreeMem=N/A "
              f"Sockets={node.cpus} Boards=1"),
             f"State={node.state} ThreadsPerCore=1 TmpDisk=0 Weight={node.weight} Owner=N/A MCS_label=N/A"]
    if node.partitions:
        lines.append(f"Partitions={','.join(node.partitions)} ")
    lines += [f"BootTime={_time(node.boot_time)} SlurmdStartTime={_time(node.slurmd_start_time)}",
              f"LastBusyTime={_time(node.last_busy_time, 'Unknown')}",
              "CfgTRES=" + node_tres(cpus=node.cpus, memory_mb=node.real_memory_mb, gpus=node.gpus,
                                     billing=node.billing),
              "AllocTRES=" + node_tres(cpus=node.alloc_cpus, memory_mb=node.alloc_memory_mb, gpus=node.alloc_gpus),
              "CapWatts=n/a",
              "CurrentWatts=0 AveWatts=0",
              "ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s"]
    if node.reason:
        stamp = f" [{node.reason_user}@{_time(node.reason_time)}]" if node.reason_time else ""
        lines.append(f"Reason={node.reason}{stamp}")
    return lines


def not_found(name: str) -> str:
    """What scontrol prints, on its standard output, for a name no node has (exit status 1)."""
    return f"Node {name} not found\n"


def scontrol_node_text(nodes: Sequence[ScontrolNode | str], *, one_liner: bool = False) -> str:
    """The paragraphs in the order asked (a name asked twice twice: fixtures/22.05/node/order); a
    name (str) instead of a node is one no node has, its not_found line in its place
    (node/unknown-list)."""
    end = " " if one_liner else "\n   "
    return "".join(not_found(node) if isinstance(node, str)
                   else end.join(_lines(node)) + ("\n" if one_liner else "\n\n") for node in nodes)


def scontrol_node_rows(nodes: Iterable[ScontrolNode | str]) -> list[dict[str, Any]]:
    return [{"name": node.name, "state": node.state, "cpus": node.cpus, "allocCpus": node.alloc_cpus,
             "realMemory": node.real_memory_mb, "allocMemory": node.alloc_memory_mb, "gpus": node.gpus,
             "allocGpus": node.alloc_gpus, "weight": node.weight, "partitions": list(node.partitions),
             "reason": node.reason}
            for node in nodes if not isinstance(node, str)]
