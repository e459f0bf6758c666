"""What a joining machine must have to serve its pool. Pure Python.

An agent reports the GPUs ``nvidia-smi --query-gpu=index,uuid,name,memory.total`` lists; the
control plane maps each marketing name to the catalog's accelerator type and refuses a machine
whose GPUs are fewer than, or of another model than, its pool's machine type takes (as a GKE
node pool's machine type fixes its accelerators). A simulated node stands in for hardware the
admin does not have: it claims its pool's GPUs and is marked simulated everywhere it is shown.
"""

from __future__ import annotations

import re
from typing import Any

NO_ACCELERATOR = "ACCELERATOR_TYPE_UNSPECIFIED"

#: nvidia-smi's product names (first match wins) -> the catalog's accelerator type.
_GPU_NAMES: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(pattern, re.I), accelerator) for pattern, accelerator in (
    (r"\bGB200\b", "NVIDIA_GB200"),
    (r"\bB200\b", "NVIDIA_B200"),
    (r"\bH200\b", "NVIDIA_H200_141GB"),
    (r"\bH100\b.*\bMEGA\b", "NVIDIA_H100_MEGA_80GB"),
    (r"\bH100\b", "NVIDIA_H100_80GB"),
    (r"\bA100\b.*80\s*GB", "NVIDIA_A100_80GB"),
    (r"\bA100\b", "NVIDIA_TESLA_A100"),
    (r"\bL4\b", "NVIDIA_L4"),
    (r"\bT4\b", "NVIDIA_TESLA_T4"),
    (r"\bV100\b", "NVIDIA_TESLA_V100"),
    (r"\bP100\b", "NVIDIA_TESLA_P100"),
    (r"\bP4\b", "NVIDIA_TESLA_P4"),
    (r"\bK80\b", "NVIDIA_TESLA_K80"),
    (r"RTX PRO 6000", "NVIDIA_RTX_PRO_6000"),
))


def accelerator_type_of(gpu_name: str) -> str | None:
    """The catalog's accelerator type for an nvidia-smi product name, or None if it has none."""
    for pattern, accelerator in _GPU_NAMES:
        if pattern.search(gpu_name):
            return accelerator
    return None


def simulated_gpus(accelerator_type: str, count: int) -> list[dict[str, Any]]:
    return [{"index": index, "uuid": f"SIMULATED-{index}", "name": f"simulated {accelerator_type}",
             "memoryMiB": 0} for index in range(count)]


def facts_problem(*, facts: dict[str, Any], machine_type: str, accelerator_type: str,
                  accelerator_count: int) -> str | None:
    """Why a machine with ``facts`` cannot serve a pool of this shape, or None when it can."""
    if facts.get("simulated") or accelerator_type == NO_ACCELERATOR or not accelerator_count:
        return None
    gpus = facts.get("gpus") or []
    matching = [gpu for gpu in gpus if accelerator_type_of(str(gpu.get("name", ""))) == accelerator_type]
    if len(matching) >= accelerator_count:
        return None
    found = ", ".join(sorted({str(gpu.get("name", "?")) for gpu in gpus})) or "no NVIDIA GPU (nvidia-smi found none)"
    return (f"this machine cannot serve pool machine type {machine_type}: it needs {accelerator_count} x "
            f"{accelerator_type} and the machine has {len(matching)} of them (found: {found}). Join a pool "
            f"that matches the machine, or pass --simulate to stand in for hardware you do not have.")
