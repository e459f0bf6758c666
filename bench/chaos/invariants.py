"""What must hold after (and during) a drill, read from the database - the record.

- nothing lost: every job the API accepted exists;
- no double allocation: at no moment two active replicas on one node (sampled while the drill
  runs), GPU indices within the node's GPUs, and on every node the replicas that really ran did so
  one after the other (start/end times written by that node's agent);
- no gang partly started: every attempt of a job was placed whole (every replica of every pool, in
  one transaction, so with one assignment time), no waiting job holds a node, and every replica
  of a job that succeeded started;
- every job reaches a final state, and then no replica holds a node.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from bench.chaos.cluster import wait_until


@dataclass
class Check:
    name: str
    ok: bool
    detail: str = ""

    def line(self) -> str:
        return f"  [{'ok' if self.ok else 'VIOLATED'}] {self.name}" + (f": {self.detail}" if self.detail else "")


def _job_ids(names: list[str]) -> list[str]:
    return [name.rsplit("/", 1)[1] for name in names]


def snapshot_violations() -> list[str]:
    """Double allocations and partial gangs visible right now, read in one transaction."""
    from django.db import transaction
    from django.db.models import Count

    from trainhub.jobs import states
    from trainhub.jobs.models import Replica

    found: list[str] = []
    with transaction.atomic():
        doubled = (Replica.objects.filter(active=True).values("node_id").annotate(n=Count("id"))
                   .filter(n__gt=1))
        found += [f"node {row['node_id']} holds {row['n']} active replicas" for row in doubled]
        rows = Replica.objects.filter(active=True).values_list(
            "job__job_id", "job__state", "node__name", "node__pool__accelerator_count", "gpu_indices")
        for job_id, state, node, gpus, indices in rows:
            if len(set(indices)) != len(indices) or any(not 0 <= i < gpus for i in indices):
                found.append(f"job {job_id} holds GPUs {indices} of {node}, which has {gpus}")
            if state == states.QUEUED:
                found.append(f"job {job_id} is QUEUED but holds node {node}")
    return found


@dataclass
class Sampler:
    """Checks ``snapshot_violations`` every ``interval`` seconds in a thread while a drill runs."""

    interval: float = 0.5
    samples: int = 0
    violations: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> "Sampler":
        self._thread = threading.Thread(target=self._run, name="invariant-sampler", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        from django.db import OperationalError, connection

        try:
            while not self._stop.wait(self.interval):
                try:
                    self.violations += snapshot_violations()
                    self.samples += 1
                except OperationalError:  # SQLite busy under load: the next sample reads again
                    pass
        finally:
            connection.close()

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def check(self) -> Check:
        unique = sorted(set(self.violations))
        return Check("no double allocation or waiting job holding a node at any sampled moment",
                     not unique, f"{self.samples} samples" + (f"; {unique[:5]}" if unique else ""))


def wait_for_final_states(accepted: list[str], *, timeout: float) -> float:
    """Seconds until every accepted job is in a final state (raises TimeoutError after ``timeout``)."""
    from trainhub.jobs import states
    from trainhub.jobs.models import CustomJob

    ids = _job_ids(accepted)
    begun = time.monotonic()

    def settled() -> bool:
        return not CustomJob.objects.filter(job_id__in=ids).exclude(state__in=states.TERMINAL).exists()

    try:
        wait_until(settled, timeout=timeout, interval=1.0, what="every job to reach a final state")
    except TimeoutError:
        pass
    return time.monotonic() - begun


def end_checks(accepted: list[str], *, expected_states: set[str], settle_seconds: float = 20) -> tuple[list[Check], dict]:
    """The invariants once the load has stopped and jobs had time to finish; plus state counts."""
    from trainhub.jobs import states
    from trainhub.jobs.models import CustomJob, Replica

    ids = _job_ids(accepted)
    jobs = {job.job_id: job for job in CustomJob.objects.filter(job_id__in=ids).only(
        "pk", "job_id", "state", "spec", "restart_count", "error")}
    checks = [Check("no job lost: every accepted job exists", len(jobs) == len(set(ids)),
                    f"{len(set(ids)) - len(jobs)} of {len(ids)} missing" if len(jobs) != len(set(ids))
                    else f"{len(ids)} jobs")]
    unfinished = Counter(job.state for job in jobs.values() if job.state not in states.TERMINAL)
    checks.append(Check("every job reached a final state", not unfinished,
                        f"still {dict(unfinished)}" if unfinished else ""))
    by_state = Counter(job.state for job in jobs.values())
    unexpected = {state: n for state, n in by_state.items() if state not in expected_states | set(unfinished)}
    examples = [job.error.get("message", "") for job in jobs.values() if job.state in unexpected and job.error][:3]
    checks.append(Check(f"final states are {'/'.join(sorted(s.removeprefix('JOB_STATE_') for s in expected_states))}",
                        not unexpected, f"{unexpected} e.g. {examples}" if unexpected else ""))

    # Replicas of finished jobs are stopped by their agent within a tick or two.
    def released() -> bool:
        return not Replica.objects.filter(active=True, job__state__in=states.TERMINAL).exists()

    try:
        wait_until(released, timeout=settle_seconds, interval=0.5, what="finished jobs to release their nodes")
    except TimeoutError:
        pass
    held = list(Replica.objects.filter(active=True, job__state__in=states.TERMINAL)
                .values_list("job__job_id", "node__name")[:5])
    checks.append(Check("no finished job still holds a node", not held, str(held) if held else ""))

    replicas = list(Replica.objects.filter(job__job_id__in=ids).values_list(
        "job__job_id", "attempt", "pool_index", "replica_index", "node_id", "assigned_at", "started_at", "ended_at"))
    checks.append(_gangs_whole(jobs, replicas))
    checks.append(_nodes_used_one_at_a_time(replicas))
    return checks, {"states": {s.removeprefix("JOB_STATE_"): n for s, n in sorted(by_state.items())},
                    "restarts": sum(job.restart_count for job in jobs.values()), "replicas": len(replicas)}


def _gangs_whole(jobs: dict, replicas: list[tuple]) -> Check:
    from trainhub.jobs import states

    attempts: dict[tuple[str, int], list[tuple]] = defaultdict(list)
    for row in replicas:
        attempts[(row[0], row[1])].append(row)
    partial = []
    for (job_id, attempt), rows in attempts.items():
        pools = jobs[job_id].spec["jobSpec"]["workerPoolSpecs"]
        expected = {(index, r) for index, pool in enumerate(pools) if pool for r in range(pool["replicaCount"])}
        placed = {(row[2], row[3]) for row in rows}
        if placed != expected or len({row[5] for row in rows}) != 1:
            partial.append(f"{job_id} attempt {attempt}: placed {sorted(placed)} of {sorted(expected)}")
        elif jobs[job_id].state == states.SUCCEEDED and attempt == jobs[job_id].restart_count \
                and any(row[6] is None for row in rows):
            partial.append(f"{job_id} succeeded but not every replica of its gang started")
    return Check("no gang partly placed or partly started", not partial,
                 f"{len(attempts)} gang placements" + (f"; {partial[:5]}" if partial else ""))


def _nodes_used_one_at_a_time(replicas: list[tuple]) -> Check:
    runs: dict[int, list[tuple]] = defaultdict(list)
    for job_id, attempt, _, _, node_id, _, started, ended in replicas:
        if started is not None and node_id is not None:
            runs[node_id].append((started, ended, job_id, attempt))
    overlaps = []
    for node_id, spans in runs.items():
        spans.sort(key=lambda span: span[0])
        for (_, ended, job_id, _), (next_start, _, next_job, _) in zip(spans, spans[1:]):
            if ended is None or ended > next_start:
                overlaps.append(f"node {node_id}: {job_id} still ran when {next_job} started")
    return Check("every node ran one replica at a time", not overlaps,
                 f"{sum(len(s) for s in runs.values())} replica runs on {len(runs)} nodes"
                 + (f"; {overlaps[:5]}" if overlaps else ""))
