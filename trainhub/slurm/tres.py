"""Slurm memory sizes, TRES strings, ``--gres`` requests and TRESBillingWeights.

Public API (pure Python, no Django)::

    parse_memory_mb(text: str) -> int                       # "64G" -> 65536 (str_to_mbytes; no suffix = MB)
    format_memory_mb(mb: int) -> str                        # 65536 -> "64G", 1000 -> "1000M" (exact units only)
    parse_tres(text: str, *, allow_unset=False) -> dict[str, int | None]
                                                            # "cpu=8,mem=64G,gres/gpu=4" -> {"cpu": 8, "mem": 65536, "gres/gpu": 4}
                                                            # with allow_unset, "-1" -> None (sacctmgr clears the limit)
    format_tres(tres: Mapping[str, int]) -> str             # "cpu=8,mem=64G,node=1,billing=8,gres/gpu=4" (Slurm's id order)
    tres_sort_key(name: str)                                # sort TRES names in that order
    parse_gres(text: str) -> list[GresRequest]              # --gres / NodeName Gres=: "gpu:a100:4,nic:1"
    gres_tres(requests) -> dict[str, int]                   # {"gres/gpu": 4, "gres/gpu:a100": 4, ...}
    parse_billing_weights(text: str) -> dict[str, float]    # TRESBillingWeights="CPU=1.0,Mem=0.25G,GRES/gpu=2.0"
    billable_tres(tres, weights, *, max_tres=False) -> float
    memory_tres(*, mem_per_gpu, mem_per_cpu, mem_per_node, gpus, cpus, nodes) -> int
                                                            # the memory (MB) a job's TRES counts
    TresFormatError(ValueError)

TRES names are Slurm's ``type[/name]`` strings, lower-cased type: ``cpu``, ``mem`` (MB), ``node``,
``billing``, ``energy``, ``fs/disk``, ``vmem``, ``pages``, ``gres/<name>[:<type>]``,
``license/<name>``, ``bb/<name>`` (slurm:src/common/assoc_mgr.c builds ``type/name``).

Billing (slurm:src/slurmctld/job_mgr.c ``calc_job_billable_tres``, assoc_mgr.c
``assoc_mgr_tres_weighted``): without weights a job bills its CPU count; with weights it bills
``sum(weight * count)``; with PriorityFlags=MAX_TRES the node TRES (cpu, mem, node, gres/*) count
only through their maximum weighted value, plus the sum of the others (licenses, bb). The
slurm.conf.5 text says "per node" but the code weighs the job's totals; the code is followed.
A memory weight with a unit suffix is per that unit (``Mem=0.25G`` = 0.25 per GB).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = [
    "GresRequest",
    "TresFormatError",
    "tres_type_known",
    "billable_tres",
    "format_memory_mb",
    "format_tres",
    "gres_tres",
    "memory_tres",
    "parse_billing_weights",
    "parse_gres",
    "parse_memory_mb",
    "parse_tres",
    "tres_sort_key",
]

_MEMORY = re.compile(r"^(\d+)([KMGTkmgt]?)$")
_UNIT_MB = {"": 1, "M": 1, "G": 1024, "T": 1024 * 1024}
_UNITS_FROM_MB = ("M", "G", "T", "P")
_WEIGHT_UNIT_MB = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}
_SIMPLE_TRES = ("cpu", "mem", "energy", "node", "billing", "fs/disk", "vmem", "pages")
_NAMED_TRES_TYPES = ("gres", "license", "bb")
_TRES_NAME = re.compile(r"^(?:(?P<simple>cpu|mem|energy|node|billing|fs/disk|vmem|pages)"
                        r"|(?P<type>gres|license|bb)/(?P<name>[A-Za-z0-9_.-]+(?::[A-Za-z0-9_.-]+)?))$",
                        re.IGNORECASE)
_GRES_ITEM = re.compile(r"^(?P<name>[A-Za-z][A-Za-z0-9_.-]*)(?::(?P<type>[A-Za-z][A-Za-z0-9_.-]*))?(?::(?P<count>\d+))?$")
_WEIGHT = re.compile(r"^(-?(?:\d+\.?\d*|\.\d+))([KMGTkmgt]?)$")
#: TRES types counted per node by PriorityFlags=MAX_TRES (assoc_mgr_tres_weighted).
_NODE_TRES = ("cpu", "mem", "node")


class TresFormatError(ValueError):
    """A memory size, TRES list, GRES request or billing weight Slurm would reject."""


def parse_memory_mb(text: str) -> int:
    """Megabytes in ``text`` (``str_to_mbytes``): no suffix or M = MB, K rounds up, G, T."""
    match = _MEMORY.match(text.strip()) if isinstance(text, str) else None
    if not match:
        raise TresFormatError(f"invalid memory size {text!r}: use a number with an optional K, M, G or T suffix")
    number, unit = int(match.group(1)), match.group(2).upper()
    if unit == "K":
        return -(-number // 1024)
    return number * _UNIT_MB[unit]


def format_memory_mb(mb: int) -> str:
    """A size in MB the way TRES strings print it: the largest unit that divides it exactly."""
    value, unit = int(mb), 0
    while value and value % 1024 == 0 and unit < len(_UNITS_FROM_MB) - 1:
        value //= 1024
        unit += 1
    return f"{value}{_UNITS_FROM_MB[unit]}"


def tres_type_known(name: str) -> bool:
    """Whether ``name``'s type (``cpu``, ``fs/disk``, the ``gres`` of ``gres/gpu``) is one Slurm has."""
    lowered = name.strip().lower()
    return lowered in _SIMPLE_TRES or lowered.split("/", 1)[0] in _NAMED_TRES_TYPES


def _tres_name(raw: str) -> str:
    match = _TRES_NAME.match(raw.strip())
    if not match:
        raise TresFormatError(
            f"unknown TRES {raw.strip()!r}: use cpu, mem, node, billing, energy, fs/disk, vmem, pages, "
            "gres/<name>, license/<name> or bb/<name>")
    if match.group("simple"):
        return match.group("simple").lower()
    return f"{match.group('type').lower()}/{match.group('name')}"


def parse_tres(text: str, *, allow_unset: bool = False) -> dict[str, int | None]:
    """``name=value`` pairs separated by commas; ``mem`` takes a size suffix, others are counts.

    With ``allow_unset`` a value of ``-1`` yields None (sacctmgr's way to clear one TRES limit).
    """
    if not isinstance(text, str) or not text.strip():
        raise TresFormatError("a TRES list such as cpu=8,mem=64G,gres/gpu=4 is required")
    result: dict[str, int | None] = {}
    for item in text.split(","):
        name, equals, raw_value = item.partition("=")
        if not equals:
            raise TresFormatError(f"invalid TRES {item.strip()!r}: expected name=value")
        tres = _tres_name(name)
        value = raw_value.strip()
        if tres in result:
            raise TresFormatError(f"TRES {tres} is given twice")
        if value == "-1" and allow_unset:
            result[tres] = None
        elif tres == "mem":
            result[tres] = parse_memory_mb(value)
        elif value.isdigit():
            result[tres] = int(value)
        else:
            raise TresFormatError(f"invalid count {value!r} for TRES {tres}")
    return result


def tres_sort_key(name: str) -> tuple[int, str]:
    """Slurm prints TRES by id: the fixed types in their id order, then gres, license, bb by name."""
    if name in _SIMPLE_TRES:
        return (_SIMPLE_TRES.index(name), "")
    return (len(_SIMPLE_TRES) + _NAMED_TRES_TYPES.index(name.split("/", 1)[0]), name)


def format_tres(tres: Mapping[str, int], *, by_name: bool = False) -> str:
    """``cpu=8,mem=64G,node=1,billing=8,gres/gpu=4``: zero counts are left out, as Slurm does; in
    Slurm's TRES order, or ``by_name`` as sacct prints AllocTRES (``billing=4,cpu=4,gres/gpu=32,node=4``)."""
    parts = []
    for name in sorted(tres) if by_name else sorted(tres, key=tres_sort_key):
        count = tres[name]
        if not count:
            continue
        parts.append(f"{name}={format_memory_mb(count) if name == 'mem' else count}")
    return ",".join(parts)


@dataclass(frozen=True)
class GresRequest:
    """One ``name[:type][:count]`` item of ``--gres`` or a node's ``Gres=`` (count defaults to 1)."""

    name: str
    type: str | None
    count: int

    def __str__(self) -> str:
        return ":".join(part for part in (self.name, self.type, str(self.count)) if part)


def parse_gres(text: str) -> list[GresRequest]:
    """``gpu:4``, ``gpu:a100:4``, ``gpu`` (one), comma-separated; a leading ``gres/`` or ``gres:`` is
    accepted (``--gres=gres:gpu:4`` is an old spelling Slurm still takes)."""
    if not isinstance(text, str) or not text.strip():
        raise TresFormatError("a GRES such as gpu:4 is required")
    requests: list[GresRequest] = []
    for item in text.split(","):
        value = item.strip()
        for prefix in ("gres/", "gres:"):
            if value.lower().startswith(prefix):
                value = value[len(prefix):]
        match = _GRES_ITEM.match(value)
        if not match:
            raise TresFormatError(f"invalid GRES {item.strip()!r}: use name[:type][:count], e.g. gpu:4 or gpu:a100:4")
        count = int(match.group("count")) if match.group("count") is not None else 1
        requests.append(GresRequest(match.group("name"), match.group("type"), count))
    names = [(request.name, request.type) for request in requests]
    if len(set(names)) != len(names):
        raise TresFormatError(f"GRES {text.strip()!r} names the same resource twice")
    return requests


def gres_tres(requests: Iterable[GresRequest]) -> dict[str, int]:
    """The TRES counts of GRES requests: ``gres/<name>`` totals, and ``gres/<name>:<type>`` for typed ones."""
    totals: dict[str, int] = {}
    for request in requests:
        totals[f"gres/{request.name}"] = totals.get(f"gres/{request.name}", 0) + request.count
        if request.type:
            key = f"gres/{request.name}:{request.type}"
            totals[key] = totals.get(key, 0) + request.count
    return totals


def parse_billing_weights(text: str) -> dict[str, float]:
    """TRESBillingWeights: ``CPU=1.0,Mem=0.25G,GRES/gpu=2.0`` -> weights per unit (memory per MB)."""
    if not isinstance(text, str) or not text.strip():
        return {}
    weights: dict[str, float] = {}
    for item in text.split(","):
        name, equals, raw_value = item.partition("=")
        if not equals:
            raise TresFormatError(f"invalid billing weight {item.strip()!r}: expected TRES=weight")
        tres = _tres_name(name)
        match = _WEIGHT.match(raw_value.strip())
        if not match:
            raise TresFormatError(f"invalid billing weight {raw_value.strip()!r} for {tres}")
        weight = float(match.group(1))
        unit = match.group(2).upper()
        if unit:
            if tres != "mem":
                raise TresFormatError(f"a unit suffix is only valid on the mem weight, not {tres}")
            weight /= _WEIGHT_UNIT_MB[unit]
        weights[tres] = weight
    return weights


def billable_tres(tres: Mapping[str, int], weights: Mapping[str, float], *, max_tres: bool = False) -> float:
    """The billable TRES of an allocation (usage is charged in these units per second)."""
    if not weights:
        return float(tres.get("cpu", 0))
    per_node = 0.0
    global_sum = 0.0
    for name, weight in weights.items():
        value = tres.get(name, 0) * weight
        if max_tres and (name in _NODE_TRES or name.startswith("gres/")):
            per_node = max(per_node, value)
        else:
            global_sum += value
    return per_node + global_sum


def memory_tres(*, mem_per_gpu: int, mem_per_cpu: int, mem_per_node: int, gpus: int, cpus: int, nodes: int) -> int:
    """The memory (MB) a job's TRES counts against limits such as ``GrpTRES=mem=`` (slurmctld's
    job_get_tres_mem): --mem-per-gpu times its ``gpus``, else --mem-per-cpu times its ``cpus``, else
    --mem (``mem_per_node``) times its ``nodes``; sbatch takes at most one of the three. The counts are
    the request's, or, once select chose a node range's nodes, what it got there."""
    if mem_per_gpu:
        return mem_per_gpu * gpus
    if mem_per_cpu:
        return mem_per_cpu * cpus
    return mem_per_node * nodes
