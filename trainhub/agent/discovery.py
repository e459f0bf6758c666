"""What this machine is: the facts an agent reports at join and at every start.

GPUs come from ``nvidia-smi --query-gpu=index,uuid,name,memory.total --format=csv,noheader``
(one line per GPU, e.g. ``0, GPU-9d3c..., NVIDIA H100 80GB HBM3, 81559 MiB``); no nvidia-smi,
or one that fails, means no GPU. The address peers reach this machine on is the source address
the kernel picks for the control plane's host, unless the admin names one (--address).
"""

from __future__ import annotations

import os
import platform
import shutil
import socket
import subprocess
from typing import Any
from urllib.parse import urlsplit

NVIDIA_SMI_QUERY = ["--query-gpu=index,uuid,name,memory.total", "--format=csv,noheader"]


def parse_nvidia_smi(text: str) -> list[dict[str, Any]]:
    """GPUs from nvidia-smi's CSV; a line that does not parse is skipped, not guessed at."""
    gpus = []
    for line in text.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) != 4 or not fields[0].isdigit():
            continue
        index, uuid, name, memory = fields
        mib = memory.split()[0] if memory else ""
        gpus.append({"index": int(index), "uuid": uuid, "name": name,
                     "memoryMiB": int(mib) if mib.isdigit() else None})
    return sorted(gpus, key=lambda gpu: gpu["index"])


def discover_gpus(nvidia_smi: str | None = None) -> list[dict[str, Any]]:
    binary = nvidia_smi or shutil.which("nvidia-smi")
    if not binary:
        return []
    try:
        result = subprocess.run([binary, *NVIDIA_SMI_QUERY], capture_output=True, text=True, timeout=30,  # noqa: S603
                                check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return parse_nvidia_smi(result.stdout) if result.returncode == 0 else []


def memory_bytes() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def boot_time() -> int | None:
    """When the machine booted, in seconds since the epoch (/proc/stat's btime); None where unknown."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            for line in stat:
                if line.startswith("btime "):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def operating_system() -> str:
    """uname's sysname, release and version, which slurmd reports as the node's OS."""
    name = platform.uname()
    return f"{name.system} {name.release} {name.version}"


def reachable_address(control_plane_url: str) -> str:
    """The local address the kernel routes to the control plane from (no packet is sent)."""
    parts = urlsplit(control_plane_url)
    host, port = parts.hostname or "127.0.0.1", parts.port or (443 if parts.scheme == "https" else 80)
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
        with socket.socket(family[0], socket.SOCK_DGRAM) as probe:
            probe.connect(family[4])
            return probe.getsockname()[0]
    except OSError:
        return socket.gethostname()


def machine_facts(*, control_plane_url: str, address: str | None, simulate: bool, runtime: str,
                  version: str, nvidia_smi: str | None = None) -> dict[str, Any]:
    return {
        "hostname": socket.gethostname(),
        "address": address or reachable_address(control_plane_url),
        "cpus": os.cpu_count(),
        "memoryBytes": memory_bytes(),
        # what scontrol show node prints as Arch=, OS= and BootTime= (trainhub.slurm.scontrol_node)
        "arch": platform.machine(),
        "os": operating_system(),
        "bootTime": boot_time(),
        "gpus": [] if simulate else discover_gpus(nvidia_smi),
        "simulated": simulate,
        "runtime": runtime,
        "agentVersion": version,
    }
