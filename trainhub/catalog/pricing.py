"""What a job costs: GPU-hours by type at the on-demand, Dynamic Workload Scheduler (FLEX_START)
or Spot price, plus the serverless training management fee. Pure Python, no Django.

Default prices are list-price-shaped USD per GPU-hour; DWS flex-start is "up to about half" the
on-demand price and Spot lower still. Operators override any of them with TRAINHUB_GPU_PRICES.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

DEFAULT_ON_DEMAND_PER_GPU_HOUR: dict[str, float] = {
    "NVIDIA_TESLA_T4": 0.40,
    "NVIDIA_TESLA_P4": 0.69,
    "NVIDIA_TESLA_P100": 1.68,
    "NVIDIA_TESLA_V100": 2.55,
    "NVIDIA_L4": 0.64,
    "NVIDIA_TESLA_A100": 3.37,
    "NVIDIA_A100_80GB": 4.52,
    "NVIDIA_H100_80GB": 11.27,
    "NVIDIA_H100_MEGA_80GB": 11.99,
    "NVIDIA_H200_141GB": 12.73,
    "NVIDIA_B200": 15.20,
}
DEFAULT_FLEX_START_FACTOR = 0.5
DEFAULT_SPOT_FACTOR = 0.35
#: The strategy word of a Slurm job's cost. Slurm has no price of its own: a GPU-hour a Slurm job
#: holds costs what the same GPU-hour costs an on-demand CustomJob (the catalog's on-demand price
#: and the same fee), so a project's costs add up whichever scheduler placed its jobs.
SLURM = "SLURM"


@dataclass(frozen=True)
class Prices:
    on_demand: Mapping[str, float]
    flex_start: Mapping[str, float]
    spot: Mapping[str, float]
    management_fee_fraction: float

    def per_gpu_hour(self, accelerator_type: str, strategy: str) -> float:
        """The price of a GPU-hour: FLEX_START's, SPOT's, or else (STANDARD, SLURM) on-demand."""
        table = {"FLEX_START": self.flex_start, "SPOT": self.spot}.get(strategy, self.on_demand)
        return table.get(accelerator_type, 0.0)


def build_prices(overrides: Mapping[str, Mapping[str, float]], management_fee_percent: float) -> Prices:
    """``overrides``: {accelerator: {"onDemand": x, "flexStart": y, "spot": z}} (any subset)."""
    on_demand = dict(DEFAULT_ON_DEMAND_PER_GPU_HOUR)
    flex = {k: round(v * DEFAULT_FLEX_START_FACTOR, 4) for k, v in on_demand.items()}
    spot = {k: round(v * DEFAULT_SPOT_FACTOR, 4) for k, v in on_demand.items()}
    for accelerator, values in overrides.items():
        if "onDemand" in values:
            on_demand[accelerator] = float(values["onDemand"])
        if "flexStart" in values:
            flex[accelerator] = float(values["flexStart"])
        if "spot" in values:
            spot[accelerator] = float(values["spot"])
    return Prices(on_demand, flex, spot, management_fee_percent / 100)


@dataclass(frozen=True)
class Cost:
    gpu_hours: dict[str, float]
    infrastructure: float
    management_fee: float
    on_demand_equivalent: float

    @property
    def total(self) -> float:
        return self.infrastructure + self.management_fee


def cost_of(gpus_by_type: Mapping[str, int], seconds: float, strategy: str, prices: Prices) -> Cost:
    hours = max(0.0, seconds) / 3600
    return cost_of_gpu_hours({accel: gpus * hours for accel, gpus in gpus_by_type.items() if gpus}, strategy, prices)


def cost_of_gpu_hours(gpu_hours: Mapping[str, float], strategy: str, prices: Prices) -> Cost:
    """What GPU-hours by accelerator type cost at the strategy's price, plus the management fee."""
    infrastructure = sum(h * prices.per_gpu_hour(accel, strategy) for accel, h in gpu_hours.items())
    on_demand = sum(h * prices.on_demand.get(accel, 0.0) for accel, h in gpu_hours.items())
    return Cost(dict(gpu_hours), infrastructure, infrastructure * prices.management_fee_fraction, on_demand)
