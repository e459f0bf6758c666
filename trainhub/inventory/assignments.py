"""What one node's agent must run now: the documents the agent API hands a node (reads only).

A node sees its own active replicas (at most one: a replica occupies a whole node) with what it
needs to start them - the job's spec, its place in the gang and its peers' addresses - and the
Slurm job steps allocated to it. Nothing about any other node or job is included.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.db.models import Exists, OuterRef

from trainhub.common.compiled import CompiledQuery
from trainhub.iam.selectors import registry_login_for
from trainhub.inventory.models import Executor, Node
from trainhub.jobs.models import Replica
from trainhub.slurm import arrays
from trainhub.slurm.models import JobNode, JobState, NodePhase, SlurmJob, StepNode
from trainhub.slurm.services.steps import step_credential
from trainhub.slurm.steps import TIME_LIMIT


def _epoch(moment: dt.datetime | None) -> float | None:
    return moment.timestamp() if moment is not None else None


def project_identity(project_pk: int) -> dict[str, int]:
    """The unprivileged uid and gid a project's replicas run as on every node (as Slurm runs a job
    as its submitter): one per project, so one tenant's replicas cannot read another's files."""
    uid = settings.TRAINHUB_REPLICA_UID_BASE + project_pk
    return {"uid": uid, "gid": uid}


def _image_of(spec: dict, pool_index: int) -> str | None:
    pool = spec["jobSpec"]["workerPoolSpecs"][pool_index]
    return (pool.get("containerSpec") or {}).get("imageUri") or (pool.get("pythonPackageSpec") or {}).get(
        "executorImageUri")


def _replica_document(replica: Replica, peers: dict[int, list[str]], node: Node) -> dict[str, Any]:
    job = replica.job
    image = _image_of(job.spec, replica.pool_index)
    return {
        # Only the node running this project's replica gets the project's login for its image's registry.
        "registryLogin": registry_login_for(project_pk=job.project_id, image=image) if image else None,
        "id": replica.pk, "taskName": replica.task_name, "attempt": replica.attempt,
        "stopRequested": replica.stop_requested, "gpuIndices": list(replica.gpu_indices),
        "executor": node.pool.executor, "simulatedRuntimeSeconds": node.pool.simulated_runtime_seconds,
        "primary": (replica.pool_index, replica.replica_index) == (0, 0),
        "runAs": project_identity(job.project_id),
        "context": {
            "jobId": job.job_id, "projectNumber": job.project.number, "spec": job.spec,
            "poolIndex": replica.pool_index, "replicaIndex": replica.replica_index,
            "hosts": {str(index): addresses for index, addresses in peers.items()},
            "trialId": job.trial_id or None,
            "masterPort": replica.master_port, "clusterPort": replica.cluster_port,
        },
    }


def _replicas(node: Node) -> list[dict[str, Any]]:
    replicas = list(Replica.objects.filter(node=node, active=True).select_related("job__project"))
    documents = []
    for replica in replicas:
        peers: dict[int, list[str]] = {}
        for pool_index, address, hostname in (
                Replica.objects.filter(job_id=replica.job_id, attempt=replica.attempt, restart=0)
                .order_by("pool_index", "replica_index").values_list("pool_index", "node__address", "node__hostname")):
            peers.setdefault(pool_index, []).append(address or hostname or "unknown")
        documents.append(_replica_document(replica, peers, node))
    return documents


def _step_documents(job_node: JobNode) -> list[dict[str, Any]]:
    """The job steps whose tasks on this node have not all been reported yet."""
    documents = []
    for step_node in StepNode.objects.filter(job_node=job_node, exits__isnull=True).select_related("step"):
        step = step_node.step
        layout = list(StepNode.objects.filter(step=step).order_by("node_index")
                      .values_list("job_node__node__name", "task_ids"))
        terminal = step.pty if 0 in step_node.task_ids else None
        documents.append({
            "id": step_node.pk, "stepId": step.step_id, "argv": list(step.argv), "environment": step.environment,
            # srun --pty: task 0 runs on a terminal of this size; what srun typed since, for this node to deliver.
            "pty": terminal,
            "input": ([[item.pk, item.data, item.rows, item.cols] for item in step.inputs.all()]
                      if terminal else []),
            "nodeIndex": step_node.node_index,
            "taskIds": list(step_node.task_ids), "gpuIndices": list(step_node.gpu_indices),
            "stopRequested": step_node.stop_requested, "stopSignal": step_node.stop_signal,
            "hosts": [name for name, _ in layout], "tasksPerNode": [len(tasks) for _, tasks in layout],
        })
    return documents


def _stop_cause(job_node: JobNode, job: SlurmJob) -> str | None:
    """What the batch script's slurmstepd says after ``*** JOB N ON NODE CANCELLED AT T`` when its job
    is stopped: "DUE TO TIME LIMIT" at its time limit (fixtures/22.05/srun-timeout/out-1.txt),
    nothing more after scancel (srun/out-2.txt: ``*** JOB 2 ON gpu1 CANCELLED AT T ***``); None: no
    such line (a preemption or requeue, which no recording shows)."""
    if not job_node.stop_requested:
        return None
    return {JobState.TIMEOUT: TIME_LIMIT, JobState.CANCELLED: ""}.get(job.ending_state)


def _slurm_document(job_node: JobNode) -> dict[str, Any]:
    job = job_node.job
    peers = list(JobNode.objects.filter(job_id=job.pk, run_index=job_node.run_index)
                 .order_by("-batch_host", "node__name").values_list("pk", "node__name", "cpus"))
    start = job.start_time
    return {
        "id": job_node.pk, "runIndex": job_node.run_index, "phase": job_node.phase, "batchHost": job_node.batch_host,
        "stopRequested": job_node.stop_requested, "killAt": _epoch(job_node.kill_at),
        "stopCause": _stop_cause(job_node, job),
        "gpuIndices": list(job_node.gpu_indices), "nodeName": job_node.node.name,
        "simulated": job_node.node.pool.executor == Executor.SIMULATED,
        "simulatedRuntimeSeconds": job_node.node.pool.simulated_runtime_seconds,
        "hosts": [name for _, name, _ in peers], "cpusPerNode": [cpus for _, _, cpus in peers],
        "index": next(i for i, (pk, _, _) in enumerate(peers) if pk == job_node.pk),
        "prologScripts": job.cluster.prolog_scripts, "epilogScripts": job.cluster.epilog_scripts,
        # srun in the batch script proves it runs inside this run of this job with this credential.
        "stepCredential": (step_credential(job_pk=job.pk, run_index=job_node.run_index)
                           if job_node.batch_host else None),
        # The batch script and the step tasks run as the cluster's project uid, as its replicas do.
        "runAs": project_identity(job.cluster.project_id),
        "steps": _step_documents(job_node),
        "job": {
            "clusterId": job.cluster.cluster_id, "jobId": job.job_id, "name": job.name, "user": job.user_name,
            # the submitter's POSIX identity (SLURM_JOB_UID, SLURM_JOB_GID), not runAs's
            "uid": job.uid, "gid": job.gid,
            "account": job.account, "partition": job.partition, "qos": job.qos, "numTasks": job.num_tasks,
            "cpusPerTask": job.cpus_per_task, "ntasksPerNode": job.ntasks_per_node,
            "gpusPerJob": job.gpus_per_job, "gpusPerNodeOption": job.gpus_per_node_option,
            "gpusPerTask": job.gpus_per_task, "cpusPerGpu": job.cpus_per_gpu, "workDir": job.work_dir,
            "memory": [job.mem_per_node, job.mem_per_cpu, job.mem_per_gpu],
            # %A and %a resolved here: the agent knows only the job id (for %j, and %A outside arrays).
            "stdoutPattern": arrays.file_pattern(job.stdout_pattern, array_job_id=job.array_job_id,
                                                 task_id=job.array_task_id),
            "stderrPattern": arrays.file_pattern(job.stderr_pattern, array_job_id=job.array_job_id,
                                                 task_id=job.array_task_id),
            "arrayEnvironment": arrays.task_environment(array_job_id=job.array_job_id, task_id=job.array_task_id,
                                                        tasks=job.array_tasks)
            if job.array_job_id is not None and job.array_task_id is not None else {},
            "comment": job.comment, "script": job.script, "scriptArgs": list(job.script_args),
            "export": job.export, "signal": job.signal,
            "startEpoch": int(start.timestamp()) if start else None,
            "timeLimitMinutes": job.time_limit, "exitCode": job.exit_code or 0, "exitSignal": job.exit_signal,
        },
    }


def _slurm(node: Node) -> list[dict[str, Any]]:
    job_nodes = (JobNode.objects.filter(node=node).exclude(phase=NodePhase.DONE)
                 .select_related("job__cluster", "node__pool").order_by("pk"))
    return [_slurm_document(job_node) for job_node in job_nodes]


def node_assignments(*, node: Node) -> dict[str, Any]:
    """Everything ``node`` must run, as the agent API answers it, with the node's state: an agent
    whose last heartbeat was answered with another state heart-beats at once (a node the sweep
    marked DOWN while its agent was silent comes back UP as soon as the agent is heard again)."""
    return {"node": node.name, "state": node.state, "replicas": _replicas(node), "slurm": _slurm(node)}


#: A node's name, state and whether anything is assigned to it, in one statement built once per
#: process. Most full fetches are an idle node's (after each exit report, the periodic full sync):
#: building the replica and Slurm queries to find nothing was most of their CPU.
_NODE_AND_WORK = CompiledQuery(
    lambda node_id: Node.objects.filter(pk=node_id).annotate(
        has_replicas=Exists(Replica.objects.filter(node_id=OuterRef("pk"), active=True)),
        has_slurm=Exists(JobNode.objects.filter(node_id=OuterRef("pk")).exclude(phase=NodePhase.DONE)),
    ).values_list("name", "state", "has_replicas", "has_slurm"),
    2_147_483_646)


def node_assignments_of(node_id: int) -> dict[str, Any]:
    """``node_assignments`` of the node with primary key ``node_id`` (an idle node's in one query)."""
    rows = _NODE_AND_WORK.rows(node_id)
    if not rows:
        raise Node.DoesNotExist(f"node {node_id} does not exist")
    name, state, has_replicas, has_slurm = rows[0]
    if not (has_replicas or has_slurm):
        return {"node": name, "state": state, "replicas": [], "slurm": []}
    return node_assignments(node=Node.objects.select_related("pool").get(pk=node_id))
