"""The scheduler's invariants under random sequences of events, on the real services and database.

A hypothesis state machine submits gangs (STANDARD, FLEX_START, SPOT; A100, T4, H100 and CPU
replicas; 1-4 replicas), sets quotas, runs passes, starts, finishes and cancels jobs, lets time
pass, expires node heartbeats, dedicates nodes to a persistent resource, flushes Redis and kills
a pass mid-way (inside the allocation transaction, or after the database writes and before the
Redis ones). After every step:
- no node holds two active replicas, and no replica holds more GPUs than its node has;
- no gang is partly started: a job holding nodes holds one for every replica; a waiting job none;
- quota usage never exceeds a limit;
- no job is lost: every accepted job is in the database, and while Redis is warm every waiting
  job is in the pass's queue (after a flush the next pass's reconcile restores it);
- no ordinary job runs on a node dedicated to a persistent resource.
Every pass takes an explicit ``now``; passes run only when the machine says so.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter

import pytest
from django.conf import settings as django_settings
from django.db import transaction
from django.test import TestCase
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from tests.conftest import container_pool, job_body, later
from trainhub.common.errors import ApiError
from trainhub.common.redis import get_redis
from trainhub.inventory.models import Node
from trainhub.inventory.services import NodesUnavailable, node_heartbeat, nodes_dedicate, nodes_release
from trainhub.jobs import services, states
from trainhub.jobs.models import CustomJob, Replica
from trainhub.scheduling import working_memory
from trainhub.scheduling.quota import quota_metric
from trainhub.scheduling.selectors import quota_limits, quota_usage
from trainhub.scheduling.services import nodes_sweep_heartbeats, quota_set, scheduler_pass

RESOURCE = "persistentResources/0"
POOLS = {
    "a100": lambda replicas: container_pool("a2-highgpu-1g", replicas=replicas),
    "t4x1": lambda replicas: container_pool(replicas=replicas, accelerator="NVIDIA_TESLA_T4", count=1),
    "t4x4": lambda replicas: container_pool(replicas=replicas, accelerator="NVIDIA_TESLA_T4", count=4),
    "h100": lambda replicas: container_pool("a3-highgpu-8g", replicas=replicas),
    "cpu": lambda replicas: container_pool(replicas=replicas),
}

#: The quotas of the GPUs the cluster has (the others could never bind).
METRICS = sorted({quota_metric(gpu, strategy) for gpu in ("NVIDIA_TESLA_A100", "NVIDIA_TESLA_T4", "NVIDIA_H100_80GB")
                  for strategy in ("STANDARD", "SPOT")})


class WorkerKilled(Exception):
    """Stands for a worker killed in the middle of a pass."""


class SchedulerMachine(RuleBasedStateMachine):
    cast: dict
    start: dt.datetime
    monkeypatch: pytest.MonkeyPatch

    def __init__(self):
        super().__init__()
        self._example = transaction.atomic()
        self._example.__enter__()  # every example starts from the fixtures' state and is rolled back
        self.redis = get_redis()
        self.redis.flushdb()
        self.now = self.start
        self.accepted: list[int] = []
        self.node_ids = list(Node.objects.order_by("pk").values_list("pk", flat=True))

    def teardown(self):
        transaction.set_rollback(True)
        self._example.__exit__(None, None, None)
        self.redis.flushdb()

    def _run(self, action, *args, **kwargs):
        """Run one service call as it runs in production: its on-commit work (queueing a requeued
        job, heartbeat keys) happens when it commits."""
        with TestCase.captureOnCommitCallbacks(execute=True):
            return action(*args, **kwargs)

    def _jobs(self, *job_states: str) -> list[CustomJob]:
        return list(CustomJob.objects.filter(pk__in=self.accepted, state__in=job_states).order_by("pk"))

    # --- events ---------------------------------------------------------------------------

    @initialize(limits=st.lists(st.sampled_from([None, None, 0, 1, 2, 4, 8]), min_size=len(METRICS),
                                max_size=len(METRICS)))
    def quotas(self, limits):
        for metric, limit in zip(METRICS, limits):
            if limit is not None:
                self._run(quota_set, project=self.cast["alpha"], location="us-central1", metric=metric, limit=limit,
                          actor="alice")

    @rule(jobs=st.lists(st.tuples(st.sampled_from(sorted(POOLS)), st.integers(1, 4),
                                  st.sampled_from(["STANDARD", "FLEX_START", "SPOT"])), min_size=1, max_size=3))
    def submit(self, jobs):
        for kind, replicas, strategy in jobs:
            if strategy == "FLEX_START" and kind not in ("a100", "h100"):
                strategy = "STANDARD"  # FLEX_START needs an L4, A100, H100, H200 or B200 (a 400 otherwise)
            pools = [POOLS[kind](1)] + ([POOLS[kind](replicas - 1)] if replicas > 1 else [])
            body = job_body(*pools, scheduling={"strategy": strategy, "maxWaitDuration": "300s"}
                            if strategy == "FLEX_START" else {"strategy": strategy})
            try:
                job = self._run(services.job_submit, project=self.cast["alpha"], location="us-central1",
                                user=self.cast["uma"], body=body, now=self.now)
            except ApiError as refused:  # above a quota limit, or a FLEX_START gang beyond the inventory
                assert refused.http_status == 429 or (
                    refused.http_status == 400 and strategy == "FLEX_START" and "could never start" in refused.message)
                continue
            self.accepted.append(job.pk)

    @rule(metric=st.sampled_from(METRICS), limit=st.integers(0, 4))
    def set_quota(self, metric, limit):
        # Never below what is in use: lowering a limit under usage is an admin's call, not a pass's fault.
        in_use = quota_usage().get((self.cast["alpha"].pk, "us-central1", metric), 0)
        self._run(quota_set, project=self.cast["alpha"], location="us-central1", metric=metric,
                  limit=max(limit, in_use), actor="alice")

    @rule(killed=st.sampled_from([None, None, "while writing the allocations", "after the database writes"]))
    def run_pass(self, killed):
        """A pass; or one whose worker dies in the middle of writing the allocations (their
        transaction), or after the database writes and before the Redis ones."""
        with self.monkeypatch.context() as patch:
            if killed == "while writing the allocations":
                write = Replica.objects.bulk_create

                def write_half_then_die(rows, **kwargs):
                    rows = list(rows)
                    write(rows[:len(rows) // 2 + 1], **kwargs)
                    raise WorkerKilled
                patch.setattr(Replica.objects, "bulk_create", write_half_then_die)
            elif killed == "after the database writes":
                def die(*args, **kwargs):
                    raise WorkerKilled
                patch.setattr(working_memory, "pass_end", die)
            try:
                self._run(scheduler_pass, now=self.now)
            except WorkerKilled:
                pass

    @rule(seconds=st.sampled_from([1, 20, 70, 130]), agents_alive=st.booleans())
    def time_passes(self, seconds, agents_alive):
        """Time moves on; the agents heart-beat (or all fall silent); beat runs a pass."""
        self.now = later(self.now, seconds)
        if agents_alive:
            self._run(node_heartbeat, node_ids=self.node_ids, now=self.now)
        self._run(scheduler_pass, now=self.now)

    @rule(index=st.integers(0, 5))
    def an_agent_dies(self, index):
        node_id = self.node_ids[index % len(self.node_ids)]
        silent_since = self.now - dt.timedelta(seconds=django_settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS + 1)
        Node.objects.filter(pk=node_id).update(last_heartbeat=silent_since)
        self._run(nodes_sweep_heartbeats, now=self.now)

    @rule(index=st.integers(0, 5), dedicate=st.booleans())
    def a_persistent_resource_takes_or_returns_a_node(self, index, dedicate):
        if not dedicate:
            self._run(nodes_release, owner=RESOURCE)
            return
        try:
            self._run(nodes_dedicate, nodes=[Node.objects.get(pk=self.node_ids[index % len(self.node_ids)])],
                      owner=RESOURCE)
        except NodesUnavailable:  # it runs a job
            pass

    @rule(data=st.data(), exit_code=st.sampled_from([0, 0, 1]))
    def agents_report(self, data, exit_code):
        """Stopped replicas exit, placed replicas start, and one running job's primary exits."""
        for replica in Replica.objects.filter(active=True, stop_requested=True):
            self._run(services.replica_exited, replica=replica, exit_code=-15, now=self.now)
        for replica in Replica.objects.filter(active=True, state=states.REPLICA_ASSIGNED, job__state=states.PENDING):
            self._run(services.replica_started, replica=replica, now=self.now)
        jobs = self._jobs(states.RUNNING)
        if jobs:
            job = data.draw(st.sampled_from(jobs))
            self._run(services.replica_exited, replica=job.replicas.get(active=True, pool_index=0, replica_index=0),
                      exit_code=exit_code, now=self.now)

    @rule(data=st.data())
    def cancel(self, data):
        jobs = self._jobs(*states.ACTIVE)
        if jobs:
            self._run(services.job_cancel, job=data.draw(st.sampled_from(jobs)), now=self.now)

    @rule()
    def redis_loses_its_memory(self):
        self.redis.flushdb()

    # --- invariants -----------------------------------------------------------------------

    @invariant()
    def no_gpu_is_allocated_twice(self):
        active = list(Replica.objects.filter(active=True).select_related("node__pool"))
        per_node = Counter(replica.node_id for replica in active)
        assert max(per_node.values(), default=0) <= 1, per_node
        for replica in active:
            assert len(replica.gpu_indices) <= replica.node.pool.accelerator_count
            assert all(0 <= gpu < replica.node.pool.accelerator_count for gpu in replica.gpu_indices)

    @invariant()
    def no_gang_is_partly_started(self):
        holding = Counter(Replica.objects.filter(active=True).values_list("job_id", flat=True))
        for job in CustomJob.objects.filter(state__in=(states.QUEUED, states.PENDING, states.RUNNING)):
            if job.state == states.QUEUED:
                assert holding[job.pk] == 0, job
            elif job.state == states.RUNNING or holding[job.pk]:
                assert holding[job.pk] == job.replica_count, (job, holding[job.pk])

    @invariant()
    def quota_usage_never_exceeds_a_limit(self):
        limits = quota_limits()
        for key, gpus in quota_usage().items():
            assert key not in limits or gpus <= limits[key], (key, gpus, limits[key])

    @invariant()
    def no_job_is_lost(self):
        assert set(CustomJob.objects.filter(pk__in=self.accepted).values_list("pk", flat=True)) == set(self.accepted)
        if working_memory.is_warm(self.redis):
            allocated = Replica.objects.filter(active=True).values_list("job_id", flat=True)
            waiting = set(CustomJob.objects.filter(state__in=states.WAITING).exclude(pk__in=allocated)
                          .values_list("pk", flat=True))
            assert waiting <= set(working_memory.pending_ids(self.redis))

    @invariant()
    def no_ordinary_job_runs_on_a_dedicated_node(self):
        assert not Replica.objects.filter(active=True, node__dedicated_to=RESOURCE).exists()


def test_the_scheduler_keeps_its_invariants(cast, nodes, now, monkeypatch):
    # Passes run when the machine says so, never from a submission's pass request.
    monkeypatch.setattr("trainhub.scheduling.pass_requests._send", lambda: None)
    SchedulerMachine.cast, SchedulerMachine.start, SchedulerMachine.monkeypatch = cast, now, monkeypatch
    run_state_machine_as_test(SchedulerMachine, settings=settings(
        max_examples=15, stateful_step_count=30, deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]))
