"""The node agent: starts the replicas the scheduler assigned to its nodes, streams their output
to the database, stops them when asked, reports exit codes and keeps its nodes' heartbeats.

It is driven by ``tick(now)`` so tests step it deterministically; ``run_agent`` calls it in a loop.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from pathlib import Path

from django.db.models import Q

from trainhub.agent.environment import (
    NotRunnable,
    ReplicaContext,
    replica_argv,
    replica_environment,
)
from trainhub.agent.executors import (
    FailedToStart,
    ReplicaProcess,
    SimulatedReplica,
    SubprocessReplica,
)
from trainhub.agent.outputs import list_model_files, read_hypertune_file
from trainhub.agent.slurm import SlurmNodeWork
from trainhub.inventory.models import Executor, Node
from trainhub.inventory.services import node_heartbeat
from trainhub.jobs import services as job_services
from trainhub.jobs import states
from trainhub.jobs.models import Replica

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _PrimaryOutputs:
    """Where the primary replica of a job leaves what the agent reports when it exits."""

    host: str
    metric_file: Path | None
    model_dir: Path | None


@dataclass
class _Running:
    process: ReplicaProcess
    replica: Replica
    stop_sent: dt.datetime | None = None
    outputs: _PrimaryOutputs | None = None


class NodeAgent:
    def __init__(self, *, nodes: list[Node], work_dir: Path, grace_seconds: int):
        self.node_ids = [node.pk for node in nodes]
        self.work_dir = work_dir
        self.grace = dt.timedelta(seconds=grace_seconds)
        self.running: dict[int, _Running] = {}
        self.slurm = SlurmNodeWork(node_ids=self.node_ids, work_dir=work_dir, grace=self.grace)

    def recover(self, *, now: dt.datetime) -> int:
        """At start-up: replicas this agent was running before it died are lost."""
        orphans = Replica.objects.filter(node_id__in=self.node_ids, active=True, state=states.REPLICA_RUNNING)
        count = 0
        for replica in orphans:
            job_services.replica_exited(replica=replica, exit_code=None, now=now,
                                        lost_reason="the node agent restarted while it was running")
            count += 1
        return count + self.slurm.recover(now=now)

    def tick(self, *, now: dt.datetime) -> None:
        node_heartbeat(node_ids=self.node_ids, now=now)
        replicas = (
            Replica.objects.filter(node_id__in=self.node_ids)
            .filter(Q(active=True) | Q(pk__in=list(self.running)))
            .select_related("job__project", "node__pool")
        )
        for replica in replicas:
            handle = self.running.get(replica.pk)
            if handle is not None:
                handle.replica = replica
            elif replica.active and replica.state == states.REPLICA_ASSIGNED:
                if replica.stop_requested:
                    job_services.replica_exited(replica=replica, exit_code=None, now=now,
                                                lost_reason="stopped before it started")
                else:
                    self._launch(replica, now)
        for pk in list(self.running):
            self._supervise(pk, now)
        self.slurm.tick(now=now)

    def _launch(self, replica: Replica, now: dt.datetime) -> None:
        job = replica.job
        peers = (
            Replica.objects.filter(job=job, attempt=replica.attempt)
            .select_related("node")
            .order_by("pool_index", "replica_index")
        )
        hosts: dict[int, list[str]] = {}
        for peer in peers:
            hosts.setdefault(peer.pool_index, []).append(peer.node.hostname if peer.node else "unknown")
        work_dir = self.work_dir / job.job_id / f"{replica.task_name}-{replica.attempt}"
        ctx = ReplicaContext(
            job_id=job.job_id, project_number=job.project.number, spec=job.spec,
            pool_index=replica.pool_index, replica_index=replica.replica_index,
            hosts=hosts, gpu_indices=list(replica.gpu_indices), trial_id=job.trial_id or None,
            work_dir=str(work_dir), storage_root=str(self.work_dir / "gcs"),
        )
        env = replica_environment(ctx)
        pool = replica.node.pool
        process: ReplicaProcess
        outputs = None
        if pool.executor == Executor.SIMULATED:
            process = SimulatedReplica(
                started=now, runtime=dt.timedelta(seconds=pool.simulated_runtime_seconds),
                announce=[f"simulated replica {replica.task_name} on {replica.node.name}",
                          f"CLUSTER_SPEC={env['CLUSTER_SPEC']}"],
            )
        else:
            if (replica.pool_index, replica.replica_index) == job_services.PRIMARY:
                outputs = _prepare_outputs(replica.node.hostname, env)
            try:
                process = SubprocessReplica(replica_argv(ctx, env), env, work_dir)
            except NotRunnable as exc:
                process = FailedToStart(now, str(exc))
            except OSError as exc:
                process = FailedToStart(now, f"cannot start the replica's command: {exc}")
        self.running[replica.pk] = _Running(process, replica, outputs=outputs)
        job_services.replica_started(replica=replica, now=now)

    def _supervise(self, pk: int, now: dt.datetime) -> None:
        handle = self.running[pk]
        replica = handle.replica
        wants_stop = replica.stop_requested or not replica.active
        if wants_stop and handle.stop_sent is None:
            handle.process.terminate()
            handle.stop_sent = now
        elif wants_stop and now - handle.stop_sent >= self.grace:
            handle.process.kill()
        code = handle.process.poll(now)
        lines = handle.process.drain()
        if lines:
            job_services.replica_logs_append(replica=replica, lines=lines)
        if code is not None:
            del self.running[pk]
            if handle.outputs is not None:
                _report_outputs(replica, handle.outputs)
            job_services.replica_exited(replica=replica, exit_code=code, now=now)

    def shutdown(self) -> None:
        """Stop every replica and Slurm job this agent runs (SIGTERM, then SIGKILL) when the agent exits."""
        self.slurm.shutdown()
        for handle in self.running.values():
            handle.process.terminate()
        for handle in self.running.values():
            wait = getattr(handle.process, "wait", None)
            if wait is not None:
                try:
                    wait(self.grace.total_seconds())
                except Exception:  # noqa: BLE001 - a process that ignores SIGTERM is killed below
                    handle.process.kill()


def _prepare_outputs(host: str, env: dict[str, str]) -> _PrimaryOutputs | None:
    """Create the AIP_* output directories (a Cloud Storage mount would accept writes under any
    path) and note where the primary's metric file and model directory are."""
    for name in ("AIP_MODEL_DIR", "AIP_CHECKPOINT_DIR", "AIP_TENSORBOARD_LOG_DIR"):
        if env.get(name, "").startswith("/"):
            Path(env[name]).mkdir(parents=True, exist_ok=True)
    metric_file = Path(env["CLOUD_ML_HP_METRIC_FILE"]) if "CLOUD_ML_HP_METRIC_FILE" in env else None
    model_dir = Path(env["AIP_MODEL_DIR"]) if env.get("AIP_MODEL_DIR", "").startswith("/") else None
    if metric_file is None and model_dir is None:
        return None
    return _PrimaryOutputs(host, metric_file, model_dir)


def _report_outputs(replica: Replica, outputs: _PrimaryOutputs) -> None:
    hp_metrics = read_hypertune_file(outputs.metric_file) if outputs.metric_file else []
    artifacts = {}
    if outputs.model_dir is not None:
        artifacts = {"host": outputs.host, "path": str(outputs.model_dir),
                     "files": list_model_files(outputs.model_dir)}
    job_services.job_outputs_record(job=replica.job, hp_metrics=hp_metrics, model_artifacts=artifacts)
