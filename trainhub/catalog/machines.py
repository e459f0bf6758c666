"""Machine types and accelerators that trainhub knows, as Vertex AI v1 names them.

GPU counts per machine type follow the Vertex "configure compute" compatibility table: A2, A3,
A4 and G2 machines come with a fixed number of GPUs of one type; N1 machines take 1, 2, 4 or 8
attachable T4/V100/P4/P100 GPUs depending on their size. vCPU and memory are the GCE values.
Pure Python, no Django.
"""

from __future__ import annotations

from dataclasses import dataclass

ACCELERATOR_TYPES: dict[int, str] = {
    0: "ACCELERATOR_TYPE_UNSPECIFIED",
    1: "NVIDIA_TESLA_K80",
    2: "NVIDIA_TESLA_P100",
    3: "NVIDIA_TESLA_V100",
    4: "NVIDIA_TESLA_P4",
    5: "NVIDIA_TESLA_T4",
    6: "TPU_V2",
    7: "TPU_V3",
    8: "NVIDIA_TESLA_A100",
    9: "NVIDIA_A100_80GB",
    10: "TPU_V4_POD",
    11: "NVIDIA_L4",
    12: "TPU_V5_LITEPOD",
    13: "NVIDIA_H100_80GB",
    14: "NVIDIA_H100_MEGA_80GB",
    15: "NVIDIA_H200_141GB",
    16: "NVIDIA_B200",
    17: "NVIDIA_GB200",
    18: "NVIDIA_RTX_PRO_6000",
}
NO_ACCELERATOR = "ACCELERATOR_TYPE_UNSPECIFIED"

#: Dynamic Workload Scheduler (FLEX_START) accepts only these GPU families.
FLEX_START_ACCELERATORS = frozenset(
    {
        "NVIDIA_L4",
        "NVIDIA_TESLA_A100",
        "NVIDIA_A100_80GB",
        "NVIDIA_H100_80GB",
        "NVIDIA_H100_MEGA_80GB",
        "NVIDIA_H200_141GB",
        "NVIDIA_B200",
    }
)

#: Quota metric suffix per accelerator: custom_model_training_[preemptible_]nvidia_<suffix>_gpus.
QUOTA_GPU_NAME: dict[str, str] = {
    "NVIDIA_TESLA_P100": "p100",
    "NVIDIA_TESLA_V100": "v100",
    "NVIDIA_TESLA_P4": "p4",
    "NVIDIA_TESLA_T4": "t4",
    "NVIDIA_TESLA_A100": "a100",
    "NVIDIA_A100_80GB": "a100_80gb",
    "NVIDIA_L4": "l4",
    "NVIDIA_H100_80GB": "h100",
    "NVIDIA_H100_MEGA_80GB": "h100_mega",
    "NVIDIA_H200_141GB": "h200",
    "NVIDIA_B200": "b200",
    "NVIDIA_GB200": "gb200",
    "NVIDIA_RTX_PRO_6000": "rtx_pro_6000",
}


@dataclass(frozen=True)
class MachineType:
    name: str
    vcpus: int
    memory_gib: float
    #: accelerator type -> allowed acceleratorCount values. Empty for CPU-only machines.
    accelerators: dict[str, tuple[int, ...]]

    @property
    def fixed_gpu(self) -> tuple[str, int] | None:
        """(type, count) for machine families whose GPUs come built in (A2, A3, A4, G2)."""
        if len(self.accelerators) == 1:
            (kind, counts), = self.accelerators.items()
            if len(counts) == 1 and not self.name.startswith("n1-"):
                return kind, counts[0]
        return None

    def max_gpus(self, accelerator_type: str) -> int:
        return max(self.accelerators.get(accelerator_type, (0,)))


def _fixed(name: str, vcpus: int, memory: float, accelerator: str, count: int) -> MachineType:
    return MachineType(name, vcpus, memory, {accelerator: (count,)})


def _n1_accelerators(vcpus: int) -> dict[str, tuple[int, ...]]:
    if vcpus <= 8:
        small, v100 = (1, 2, 4), (1, 2, 4, 8)
    elif vcpus <= 16:
        small, v100 = (1, 2, 4), (2, 4, 8)
    elif vcpus <= 32:
        small, v100 = (2, 4), (4, 8)
    else:
        small, v100 = (4,), (8,)
    return {
        "NVIDIA_TESLA_T4": small,
        "NVIDIA_TESLA_P4": small,
        "NVIDIA_TESLA_P100": small,
        "NVIDIA_TESLA_V100": v100,
    }


def _build_catalog() -> dict[str, MachineType]:
    machines: list[MachineType] = []
    for gpus, vcpus, memory in ((1, 12, 85), (2, 24, 170), (4, 48, 340), (8, 96, 680)):
        machines.append(_fixed(f"a2-highgpu-{gpus}g", vcpus, memory, "NVIDIA_TESLA_A100", gpus))
    machines.append(_fixed("a2-megagpu-16g", 96, 1360, "NVIDIA_TESLA_A100", 16))
    for gpus, vcpus, memory in ((1, 12, 170), (2, 24, 340), (4, 48, 680), (8, 96, 1360)):
        machines.append(_fixed(f"a2-ultragpu-{gpus}g", vcpus, memory, "NVIDIA_A100_80GB", gpus))
    for gpus, vcpus, memory in ((1, 26, 234), (2, 52, 468), (4, 104, 936), (8, 208, 1872)):
        machines.append(_fixed(f"a3-highgpu-{gpus}g", vcpus, memory, "NVIDIA_H100_80GB", gpus))
    machines.append(_fixed("a3-megagpu-8g", 208, 1872, "NVIDIA_H100_MEGA_80GB", 8))
    machines.append(_fixed("a3-ultragpu-8g", 224, 2952, "NVIDIA_H200_141GB", 8))
    machines.append(_fixed("a4-highgpu-8g", 224, 3968, "NVIDIA_B200", 8))
    for vcpus in (4, 8, 12, 16, 32):
        machines.append(_fixed(f"g2-standard-{vcpus}", vcpus, 4 * vcpus, "NVIDIA_L4", 1))
    for vcpus, gpus in ((24, 2), (48, 4), (96, 8)):
        machines.append(_fixed(f"g2-standard-{vcpus}", vcpus, 4 * vcpus, "NVIDIA_L4", gpus))
    for vcpus in (4, 8, 16, 32, 64, 96):
        machines.append(MachineType(f"n1-standard-{vcpus}", vcpus, 3.75 * vcpus, _n1_accelerators(vcpus)))
    for vcpus in (2, 4, 8, 16, 32, 64, 96):
        machines.append(MachineType(f"n1-highmem-{vcpus}", vcpus, 6.5 * vcpus, _n1_accelerators(vcpus)))
    for vcpus in (16, 32, 64, 96):
        machines.append(MachineType(f"n1-highcpu-{vcpus}", vcpus, 0.9 * vcpus, _n1_accelerators(vcpus)))
    for vcpus in (4, 8, 16, 32):
        machines.append(MachineType(f"e2-standard-{vcpus}", vcpus, 4 * vcpus, {}))
    return {machine.name: machine for machine in machines}


MACHINE_TYPES: dict[str, MachineType] = _build_catalog()


def machine_type_get(name: str) -> MachineType | None:
    return MACHINE_TYPES.get(name)


def is_flex_start_eligible(accelerator_type: str) -> bool:
    return accelerator_type in FLEX_START_ACCELERATORS


def accelerator_types() -> list[str]:
    """Every accelerator type some machine type takes, sorted."""
    return sorted({kind for machine in MACHINE_TYPES.values() for kind in machine.accelerators})


def accelerator_label(accelerator_type: str) -> str:
    """A short name for people: NVIDIA_TESLA_A100 -> "A100", NVIDIA_H100_80GB -> "H100 80GB"."""
    if accelerator_type == NO_ACCELERATOR:
        return "CPU only"
    return accelerator_type.removeprefix("NVIDIA_").removeprefix("TESLA_").replace("_", " ")
