"""A steady submission load: CustomJobs POSTed to the REST API at a fixed rate from a thread.

Jobs are gangs of 1-3 replicas, drawn from a seeded random generator: A100 VMs of a simulated
pool (1 s runs) or CPU VMs of a subprocess pool running `true`, STANDARD or FLEX_START, so that
every job can finish in seconds once placed. Every answer is recorded: an accepted job's name,
or the status and body of a refusal.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field

import requests

from bench.chaos.cluster import LOCATION, PROJECT

#: The node pools every drill's load runs on (node_pool_ensure keyword arguments).
SIMULATED_POOL = {"name": "sim-a100", "machine_type": "a2-highgpu-1g", "node_count": 12,
                  "executor": "simulated", "simulated_runtime_seconds": 1}
PROCESS_POOL = {"name": "cpu", "machine_type": "n1-standard-4", "node_count": 4, "executor": "subprocess"}
LOAD_POOLS = [SIMULATED_POOL, PROCESS_POOL]
JOBS_PATH = f"/v1/projects/{PROJECT}/locations/{LOCATION}/customJobs"


def _pool(machine_type: str, replicas: int) -> dict:
    return {"machineSpec": {"machineType": machine_type}, "replicaCount": replicas,
            "containerSpec": {"imageUri": "python:3.11", "command": ["true"]}}


def job_body(rng: random.Random, index: int) -> dict:
    """One gang: a primary plus 0-2 workers of the same machine type."""
    machine = SIMULATED_POOL["machine_type"] if rng.random() < 0.6 else PROCESS_POOL["machine_type"]
    workers = rng.choice((0, 0, 1, 2))
    pools = [_pool(machine, 1)] + ([_pool(machine, workers)] if workers else [])
    scheduling: dict = {"timeout": "600s"}
    if machine == SIMULATED_POOL["machine_type"] and rng.random() < 0.4:
        scheduling.update(strategy="FLEX_START", maxWaitDuration="0s")
    return {"displayName": f"chaos-{index}", "labels": {"drill": "chaos"},
            "jobSpec": {"workerPoolSpecs": pools, "scheduling": scheduling}}


@dataclass
class SubmissionLoad:
    """Submit ``rate`` jobs per second until stopped (or ``limit`` jobs), in a background thread."""

    base_url: str
    token: str
    rate: float
    limit: int
    seed: int = 8
    accepted: list[str] = field(default_factory=list)
    refused: list[tuple[int, str]] = field(default_factory=list)
    connection_errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return self.base_url + JOBS_PATH

    def start(self) -> "SubmissionLoad":
        self._thread = threading.Thread(target=self._run, name="submission-load", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        rng = random.Random(self.seed)
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {self.token}"
        started = time.monotonic()
        for index in range(self.limit):
            if self._stop.is_set():
                break
            time.sleep(max(0.0, started + index / self.rate - time.monotonic()))
            try:
                response = session.post(self.url, json=job_body(rng, index), timeout=30)
            except requests.RequestException as exc:
                self.connection_errors.append(str(exc))
                continue
            if response.status_code == 200:
                self.accepted.append(response.json()["name"])
            else:
                self.refused.append((response.status_code, response.text[:500]))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def summary(self) -> dict:
        return {"accepted": len(self.accepted), "refused": len(self.refused),
                "refusals": self.refused[:5], "connection_errors": self.connection_errors[:5],
                "server_errors": sum(1 for status, _ in self.refused if status >= 500)}
