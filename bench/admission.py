"""Admission under Kueue's own scheduler performance test load, on the deployed processes (issue 21).

Kueue's test (kubernetes-sigs/kueue, test/performance/scheduler, configs/baseline/generator.yaml)
builds 5 cohorts of 6 ClusterQueues, each with a nominal quota of 20 (borrowing limit 100), and
into every queue, concurrently, three streams of workloads: 350 ``small`` (request 1, running
200 ms, one every 100 ms), 100 ``medium`` (request 5, 500 ms, one every 500 ms) and 50 ``large``
(request 20, 1,000 ms, one every 1,200 ms) - 15,000 workloads arriving over 60 s. A workload runs
for its time once admitted and then finishes. Its published figures (configs/baseline/rangespec.yaml,
the mean of 5 runs): minimalkueue's wall time 351 s (the check fails above 425 s), mean time to
admission 215 s small, 77 s medium, 6.7 s large, and the queues used 58.7 % of their nominal quota.

Here the same load runs against trainhub as deployed: gunicorn (``gunicorn.conf.py``), the agents'
long poll (uvicorn), a Celery worker running the scheduler passes that submissions and exits
request, and Celery beat (its periodic pass and node liveness). A ClusterQueue is a project with a
20-GPU A100 quota; a workload is a CustomJob submitted over REST at its arrival time by
SUBMITTERS client processes; request N is N A100 GPUs (one ``a2-highgpu-1g``; ``a2-highgpu-4g`` +
``a2-highgpu-1g``; ``a2-megagpu-16g`` + ``a2-highgpu-4g``), and its run time is its command
(``sleep 0.2``). Simulated node agents (bench.agent_fleet's, one thread each) long-poll their
assignments, report ``started``, and ``exited`` once the command's time has passed; there are as
many nodes of each type as the quotas could ever fill, so quotas bind, never nodes, as in Kueue's
test (which has no nodes at all). Figures come from the database afterwards: wall time from the
first submission to the last admission (a job's first replica assignment) and to the last finish,
mean time to admission per class, quota usage over the run, and whether any project ever held more
than its quota (read every CHECK_SECONDS during the run).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from bench.report import Column, Section

if TYPE_CHECKING:
    from bench.scheduler_pass import Sizes

LOCATION = "us-central1"
METRIC = "custom_model_training_nvidia_a100_gpus"
CLASS_LABEL = "kueue-class"
#: Client processes that submit the jobs over REST, each on one kept-alive connection.
SUBMITTERS = 4
#: Client processes playing the node agents (a thread per agent).
AGENT_PROCESSES = 4
#: How often the bench reads progress and quota usage from the database while the load runs.
CHECK_SECONDS = 0.5
#: The run stops this long after the first submission, finished or not (what is left is reported).
CAP_SECONDS = 900.0


@dataclass(frozen=True)
class WorkloadClass:
    """One of the generator's workload sets: ``count`` workloads, one every ``interval_ms``."""

    name: str
    gpus: int
    runtime_ms: int
    #: Kueue's priority for the class; trainhub has no job priority (see the notes).
    priority: int
    count: int
    interval_ms: int
    #: One replica per worker pool: (machine type, its GPUs); they add up to ``gpus``.
    pools: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Load:
    """Cohorts x queues per cohort, each queue with ``nominal_quota`` GPUs and every class's stream."""

    cohorts: int
    queues_per_cohort: int
    nominal_quota: int
    classes: tuple[WorkloadClass, ...]

    @property
    def queues(self) -> list[str]:
        """Project ids, one per ClusterQueue, named after its cohort and index."""
        return [f"kueue-c{cohort}-q{queue}" for cohort in range(self.cohorts) for queue in range(self.queues_per_cohort)]

    @property
    def jobs(self) -> int:
        return len(self.queues) * sum(cls.count for cls in self.classes)


#: Kueue's configs/baseline/generator.yaml.
KUEUE_BASELINE = Load(cohorts=5, queues_per_cohort=6, nominal_quota=20, classes=(
    WorkloadClass("small", gpus=1, runtime_ms=200, priority=50, count=350, interval_ms=100,
                  pools=(("a2-highgpu-1g", 1),)),
    WorkloadClass("medium", gpus=5, runtime_ms=500, priority=100, count=100, interval_ms=500,
                  pools=(("a2-highgpu-4g", 4), ("a2-highgpu-1g", 1))),
    WorkloadClass("large", gpus=20, runtime_ms=1000, priority=200, count=50, interval_ms=1200,
                  pools=(("a2-megagpu-16g", 16), ("a2-highgpu-4g", 4))),
))

#: Kueue's published figures for that load (configs/baseline/rangespec.yaml: the mean of 5 runs, and
#: the threshold its CI checks).
KUEUE_WALL_S, KUEUE_WALL_LIMIT_S = 351.1, 425.0
KUEUE_MEAN_ADMISSION_S = {"small": 215.5, "medium": 76.8, "large": 6.7}
KUEUE_USAGE = 0.587


def load_for(cohorts: int, divisor: int) -> Load:
    """Kueue's baseline with ``cohorts`` cohorts and every class's count divided by ``divisor`` (same
    arrival intervals, so the same rates over a shorter time)."""
    return replace(KUEUE_BASELINE, cohorts=cohorts,
                   classes=tuple(replace(cls, count=cls.count // divisor) for cls in KUEUE_BASELINE.classes))


@dataclass(frozen=True)
class Arrival:
    """One workload: when it is submitted (ms from the start), to which queue, of which class."""

    at_ms: int
    queue: str
    workload_class: WorkloadClass
    index: int

    def body(self) -> dict[str, Any]:
        """The CustomJob document: one pool per (machine type, GPUs), running ``sleep <run time>``."""
        command = ["sleep", f"{self.workload_class.runtime_ms / 1000:g}"]
        return {
            "displayName": f"{self.workload_class.name}-{self.index}",
            "labels": {CLASS_LABEL: self.workload_class.name},
            "jobSpec": {"workerPoolSpecs": [
                {"machineSpec": {"machineType": machine}, "replicaCount": 1,
                 "containerSpec": {"imageUri": "busybox", "command": command}}
                for machine, _gpus in self.workload_class.pools]},
        }


def arrivals(load: Load) -> list[Arrival]:
    """Every workload of ``load`` in submission order. As Kueue's generator does, every queue runs
    each class's stream at once, and a stream waits its interval before each creation: the k-th
    workload of a class (from 0) arrives at (k + 1) x interval."""
    timetable = [Arrival((index + 1) * cls.interval_ms, queue, cls, index)
                 for queue in load.queues for cls in load.classes for index in range(cls.count)]
    order = {cls.name: position for position, cls in enumerate(load.classes)}
    return sorted(timetable, key=lambda a: (a.at_ms, a.queue, order[a.workload_class.name]))


def nodes_needed(load: Load) -> dict[str, int]:
    """Nodes per machine type so that quotas bind and nodes never do: per queue, the most nodes of a
    type that jobs within its quota can hold at once (the class with the most such nodes per GPU,
    filled to the quota), times the queues."""
    needed: dict[str, int] = {}
    for machine in sorted({machine for cls in load.classes for machine, _ in cls.pools}):
        per_gpu = max(sum(1 for m, _ in cls.pools if m == machine) / cls.gpus for cls in load.classes)
        needed[machine] = int(per_gpu * load.nominal_quota) * len(load.queues)
    return needed


# --- the live run -------------------------------------------------------------------------------

def _submitter(port: int, timetable: list[tuple[float, bytes]], start: float,
               until: float) -> tuple[dict[int, int], list[float]]:
    """Send each request at ``start`` + its offset (at once when behind) on one kept-alive connection,
    none after ``until``: the answers by status and how late each was sent (s)."""
    import socket

    from bench.submission import _read_response

    connection = socket.create_connection(("127.0.0.1", port), timeout=120)
    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    pending = bytearray()
    statuses: dict[int, int] = {}
    lateness = []
    for offset, request in timetable:
        due = start + offset
        if max(due, time.time()) >= until:
            break
        if (wait := due - time.time()) > 0:
            time.sleep(wait)
        lateness.append(max(0.0, time.time() - due))
        connection.sendall(request)
        status = _read_response(connection, pending)
        statuses[status] = statuses.get(status, 0) + 1
    connection.close()
    return statuses, lateness


def _setup(load: Load) -> str:
    """A project per queue with its quota, a user admin in every one; the user's fresh API token."""
    from bench.scheduler_pass import clear_jobs
    from trainhub.iam.roles import ADMIN
    from trainhub.iam.services import api_token_rotate, membership_set, project_create, user_ensure
    from trainhub.scheduling.models import Quota

    clear_jobs()  # another benchmark's queue (run before this one in the same database) would compete
    user = user_ensure(username="admission", password="admission-password")
    projects = [project_create(project_id=queue) for queue in load.queues]
    for project in projects:
        membership_set(project=project, user=user, role=ADMIN)
    Quota.objects.bulk_create(Quota(project=p, location=LOCATION, metric=METRIC, limit=load.nominal_quota)
                              for p in projects)
    return api_token_rotate(user=user).key


def _max_over_limit() -> int:
    """The largest excess of GPUs held over a quota limit, read from the database (<= 0: held)."""
    from trainhub.scheduling.selectors import quota_limits, quota_usage

    limits = quota_limits()
    return max((gpus - limits[key] for key, gpus in quota_usage().items() if key in limits), default=0)


def _finished_count() -> int:
    from trainhub.jobs.models import CustomJob

    return CustomJob.objects.filter(end_time__isnull=False).count()


@dataclass
class _Watch:
    worst_excess: int = 0
    checks: int = 0
    #: Every accepted job finished before the cap.
    done: bool = False


def _wait_until_finished(expected: Any, until: float) -> _Watch:
    """Read the quota usage every CHECK_SECONDS until ``expected()`` jobs (None while unknown) have
    finished or ``until`` passes."""
    watch = _Watch()
    while time.time() < until:
        watch.worst_excess = max(watch.worst_excess, _max_over_limit())
        watch.checks += 1
        total = expected()
        if total is not None and _finished_count() >= total:
            watch.done = True
            break
        time.sleep(CHECK_SECONDS)
    return watch


def admission_figures(load: Load) -> dict[str, Any]:
    """Read back from the database: admission (a job's first replica assignment) and finish per job,
    wall times, mean time to admission per class, and quota usage over the run."""
    from django.db.models import Min

    from trainhub.jobs.models import CustomJob, Replica

    admitted_at = dict(Replica.objects.filter(pool_index=0, replica_index=0).values("job_id")
                       .annotate(first=Min("assigned_at")).values_list("job_id", "first"))
    jobs = list(CustomJob.objects.values_list("pk", "labels", "create_time", "end_time", "gpu_count"))
    if not jobs:
        return {"jobs": 0}
    first = min(created for _, _, created, _, _ in jobs)
    waits: dict[str, list[float]] = defaultdict(list)
    held_gpu_seconds = 0.0
    for pk, labels, created, ended, gpus in jobs:
        if pk in admitted_at:
            waits[labels.get(CLASS_LABEL, "?")].append((admitted_at[pk] - created).total_seconds())
            if ended is not None:
                held_gpu_seconds += gpus * (ended - admitted_at[pk]).total_seconds()
    ends = [ended for _, _, _, ended, _ in jobs if ended is not None]
    span = (max(ends) - first).total_seconds() if ends else None
    row: dict[str, Any] = {
        "jobs": len(jobs), "admitted": len(admitted_at), "finished": len(ends),
        "wall_to_last_admission_s": (max(admitted_at.values()) - first).total_seconds() if admitted_at else None,
        "wall_to_last_finish_s": span,
        "usage": held_gpu_seconds / (load.nominal_quota * len(load.queues) * span) if span else None,
    }
    for cls in load.classes:
        row[f"{cls.name}_mean_admission_s"] = statistics.fmean(waits[cls.name]) if waits[cls.name] else None
    return row


def admission_run(load: Load) -> dict[str, Any]:
    """Set up, start the deployed processes, play the load, and read the figures back."""
    from django.db import connection

    from bench.agent_fleet import START_SECONDS, _client_process, fleet_agents, fleet_join
    from bench.environment import (
        free_port,
        process_tree,
        start_celery_beat,
        start_celery_worker,
        start_long_poll,
        start_web,
    )
    from bench.submission import _cpu_of, _cpu_spent, _request_bytes

    token = _setup(load)
    credentials = [credential for machine, count in nodes_needed(load).items() if count  # a small quota may need none
                   for credential in fleet_join(count, pool_name=f"admission-{machine}", machine_type=machine)]
    fleet = fleet_agents(credentials, time.time())
    timetable = [(arrival.at_ms / 1000, _request_bytes(
        f"/v1/projects/{arrival.queue}/locations/{LOCATION}/customJobs", token, json.dumps(arrival.body()).encode()))
        for arrival in arrivals(load)]
    ports = (free_port(), free_port())
    connection.close()  # the client processes are forked; they must not share this connection
    started: list[Any] = []
    load_before = os.getloadavg()
    try:
        started.append(server := start_web(ports[0]))
        started.append(start_long_poll(ports[1]))
        started.append(worker := start_celery_worker())
        started.append(start_celery_beat())
        context = multiprocessing.get_context("fork")
        with context.Pool(AGENT_PROCESSES) as agents, context.Pool(SUBMITTERS) as submitters:
            begin = time.time() + 0.5
            # Every agent has made its first round (they start spread over START_SECONDS).
            start = begin + START_SECONDS + 1
            until = start + CAP_SECONDS
            agents.starmap_async(_client_process, [
                (ports, fleet[index::AGENT_PROCESSES], begin, until, begin) for index in range(AGENT_PROCESSES)])
            time.sleep(max(0.0, start - time.time() - 0.2))
            pids = {"gunicorn": server.pids(), "celery": process_tree(worker.pid)}
            cpu_before = {name: _cpu_of(group) for name, group in pids.items()}
            sent = submitters.starmap_async(_submitter, [
                (ports[0], timetable[index::SUBMITTERS], start, until) for index in range(SUBMITTERS)])
            watch = _wait_until_finished(
                lambda: sum(statuses.get(200, 0) for statuses, _ in sent.get()) if sent.ready() else None, until)
            cpu = {name: _cpu_spent(cpu_before[name], _cpu_of(group)) for name, group in pids.items()}
            results = sent.get(timeout=120)
    finally:
        for process in reversed(started):
            process.terminate()
            process.wait(timeout=60)
    statuses: dict[int, int] = defaultdict(int)
    for answers, _ in results:
        for status, count in answers.items():
            statuses[status] += count
    lateness = sorted(late for _, lates in results for late in lates)
    return {
        **admission_figures(load), "nodes": len(credentials), "planned": len(timetable), "submitted": len(lateness),
        "stopped_at_cap": not watch.done,
        "statuses": {str(status): count for status, count in sorted(statuses.items())},
        "submit_late_p99_s": lateness[min(len(lateness) - 1, int(0.99 * len(lateness)))] if lateness else None,
        "submit_late_max_s": lateness[-1] if lateness else None,
        "quota_never_exceeded": "yes" if watch.worst_excess <= 0 else f"no (+{watch.worst_excess})",
        "quota_checks": watch.checks, "gunicorn_cpu_s": cpu["gunicorn"], "celery_cpu_s": cpu["celery"],
        "load_before": "/".join(f"{value:.1f}" for value in load_before),
        "load_after": "/".join(f"{value:.1f}" for value in os.getloadavg()),
    }


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def bench_admission(sizes: "Sizes") -> Section:
    load = load_for(sizes.admission_cohorts, sizes.admission_divisor)
    row = admission_run(load)
    full = load == KUEUE_BASELINE
    counts = ", ".join(f"{cls.count} {cls.name} ({cls.gpus} GPU, {cls.runtime_ms} ms, every {cls.interval_ms} ms)"
                       for cls in load.classes)
    section = Section(
        name="admission",
        key=("jobs",),
        title=(f"Admission, Kueue's scheduler performance load{'' if full else ' (scaled down)'}: "
               f"{load.cohorts} x {load.queues_per_cohort} projects of {load.nominal_quota} A100s, each sent {counts} "
               f"over REST; gunicorn, long poll, Celery worker and beat; {row['nodes']} simulated agents"),
        columns=[Column("jobs", "jobs"), Column("admitted", "admitted"), Column("finished", "finished"),
                 Column("wall_to_last_admission_s", "first submit -> last admission s"),
                 Column("wall_to_last_finish_s", "-> last finish s"),
                 *[Column(f"{cls.name}_mean_admission_s", f"{cls.name} mean wait s") for cls in load.classes],
                 Column("usage", "quota usage"), Column("quota_never_exceeded", "quota never exceeded"),
                 Column("submit_late_p99_s", "submit late p99 s"), Column("gunicorn_cpu_s", "gunicorn CPU s"),
                 Column("celery_cpu_s", "Celery CPU s"), Column("load_before", "load before"),
                 Column("load_after", "load after")],
        rows=[row],
        extra={"kueue": {"wall_s": KUEUE_WALL_S, "wall_limit_s": KUEUE_WALL_LIMIT_S,
                         "mean_admission_s": KUEUE_MEAN_ADMISSION_S, "usage": KUEUE_USAGE}},
    )
    kueue_waits = ", ".join(f"{name} {value:g} s" for name, value in KUEUE_MEAN_ADMISSION_S.items())
    ours = ", ".join(f"{cls.name} {_seconds(row.get(f'{cls.name}_mean_admission_s'))}" for cls in load.classes)
    section.notes += [
        f"Kueue's published figures for the full load (5 x 6 queues, 15,000 workloads; baseline rangespec, mean of "
        f"5 runs): wall {KUEUE_WALL_S:g} s (CI fails above {KUEUE_WALL_LIMIT_S:g} s), mean wait to admission "
        f"{kueue_waits}, quota usage {KUEUE_USAGE:.1%}. trainhub here: first submission to last admission "
        f"{_seconds(row.get('wall_to_last_admission_s'))}, to last finish {_seconds(row.get('wall_to_last_finish_s'))}; "
        f"mean wait {ours}; usage {'-' if row.get('usage') is None else format(row['usage'], '.1%')}"
        + ("" if full else " - a scaled-down load: compare the full run's figures, not these"),
        "What differs: Kueue's figure is minimalkueue (its scheduler and core controllers only) in envtest, with "
        "workloads created straight in the API server and marked finished by the test runner, no nodes and no pods; "
        "its queues borrow up to 100 from their cohort (120 per cohort), order by priority and preempt lower ones. "
        "trainhub's is the deployed stack on this machine's cores, shared with the submitting clients and the "
        "simulated agents: REST submissions, gang placement on real node rows, replicas started and ended through "
        "the agent API; a project holds exactly its 20 GPUs (no cohorts, no borrowing, the same 600 in total), jobs "
        "are taken oldest first (no priority, no preemption). Kueue's wall starts with minimalkueue, before the "
        "first workload, and ends once every workload has finished: the '-> last finish' column is the comparable one.",
        f"{row['submitted']:,} of {row['planned']:,} submitted, answers {row['statuses']}; submit late p99: how far "
        f"behind its arrival time the p99 submission was sent (max {_seconds(row['submit_late_max_s'])}; "
        f"{SUBMITTERS} client processes, one kept-alive connection each)"
        + (f"; STOPPED at the {CAP_SECONDS:g} s cap with jobs unfinished: the figures cover what was done by then"
           if row["stopped_at_cap"] else ""),
        f"quota: GPUs held per project read from the database {row['quota_checks']} times during the run, every "
        f"{CHECK_SECONDS:g} s; usage = GPU-seconds held (admission to finish) / (quota x projects x first submission "
        "to last finish), as Kueue's recorder averages a queue's usage over its monitoring time",
        "CPU s: gunicorn (master and workers) and the Celery worker (the passes) from the first submission to the "
        f"last finish; load average (1/5/15 min) on {os.cpu_count()} cores before the servers start and at the end",
    ]
    return section
