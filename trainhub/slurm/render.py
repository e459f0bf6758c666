"""Slurm clusters and jobs as JSON (camelCase, RFC 3339 times, durations as "1800s")."""

from __future__ import annotations

from typing import Any

from trainhub.common.wire import format_timestamp
from trainhub.inventory.models import Node
from trainhub.slurm import arrays, jobenv, scontrol_job
from trainhub.slurm.models import JobRun, Partition, SlurmCluster, SlurmJob
from trainhub.slurm.slurmconf import named_features, node_weight, real_memory_mb
from trainhub.slurm.timefmt import format_time_limit


def render_partition(partition: Partition, default: str) -> dict[str, Any]:
    body: dict[str, Any] = {"id": partition.name,
                            "nodePoolIds": sorted(pool.name for pool in partition.node_pools.all())}
    if partition.config:
        body["config"] = dict(partition.config)
    if partition.name == default:
        body["default"] = True
    return body


def render_cluster(cluster: SlurmCluster, partitions: list[Partition], nodes: list[Node] | None = None) -> dict:
    spec: dict[str, Any] = {
        "partitions": [render_partition(p, cluster.default_partition) for p in partitions],
        "defaultPartitionId": cluster.default_partition,
        "config": dict(cluster.config),
        "prologBashScripts": list(cluster.prolog_scripts),
        "epilogBashScripts": list(cluster.epilog_scripts),
    }
    if cluster.login_pool is not None:
        spec["loginNodePoolId"] = cluster.login_pool.name
    if cluster.home_directory_storage:
        spec["homeDirectoryStorage"] = cluster.home_directory_storage
    body: dict[str, Any] = {
        "name": cluster.resource_name,
        "displayName": cluster.display_name,
        "state": "RUNNING",
        "createTime": format_timestamp(cluster.create_time),
        "updateTime": format_timestamp(cluster.update_time),
        "orchestratorSpec": {"slurmSpec": spec},
    }
    if nodes is not None:
        # scontrol show node's AvailableFeatures= / ActiveFeatures=, RealMemory= and Weight=
        body["nodes"] = [_node_body(node, cluster) for node in nodes]
    return body


def _node_body(node: Node, cluster: SlurmCluster) -> dict:
    available, active = named_features(node.name, cluster)
    return {"name": node.name, "nodePoolId": node.pool.name, "state": node.state, "reason": node.state_reason,
            "gpus": node.pool.accelerator_count, "availableFeatures": list(available), "activeFeatures": list(active),
            "realMemory": real_memory_mb(node, cluster), "weight": node_weight(node, cluster)}


def render_job(job: SlurmJob, *, task_id: int | None = None) -> dict[str, Any]:
    """A job as scontrol show job gives it; an array's record also has scontrol's ArrayJobId,
    ArrayTaskId (``3-5%2`` while it stands for pending tasks, or ``task_id``, one of them) and
    ArrayTaskThrottle, and squeue's name for it (``arrayName``: ``1_[3-5%2]``, ``1_7``)."""
    array = {}
    if job.array_job_id is not None:
        task = job.array_task_id if task_id is None else task_id
        array = {"arrayJobId": job.array_job_id,
                 "arrayTaskId": arrays.task_text(pending=job.array_pending, task_id=task,
                                                 max_running=job.array_max_running),
                 "arrayTaskThrottle": job.array_max_running,
                 "arrayName": arrays.display_id(job_id=job.job_id, array_job_id=job.array_job_id,
                                                pending=job.array_pending, task_id=task,
                                                max_running=job.array_max_running)}
    body: dict[str, Any] = {
        "jobId": job.job_id,
        **array,
        "name": job.name,
        "user": job.user_name,
        "account": job.account,
        "partition": job.partition,
        "qos": job.qos,
        "state": job.state,
        "reason": job.reason,
        "priority": job.priority,
        "nice": job.nice,
        "hold": job.hold or None,
        "dependency": job.dependency,
        "nodes": job.num_nodes,
        "tasks": job.num_tasks,
        "cpusPerTask": job.cpus_per_task,
        "gpusPerNode": job.gpus_per_node,
        # -G/--gpus's count, --gpus-per-node's (0 when the GPUs per node came from --gres) and
        # --gpus-per-task's: salloc's SLURM_GPUS, SLURM_GPUS_PER_NODE and SLURM_GPUS_PER_TASK
        "gpusPerJob": job.gpus_per_job,
        "gpusPerNodeOption": job.gpus_per_node_option,
        "gpusPerTask": job.gpus_per_task,
        # --cpus-per-gpu's: salloc's SLURM_CPUS_PER_GPU
        "cpusPerGpu": job.cpus_per_gpu,
        # the GPU type asked (--gres=gpu:v100:2): the job runs only on nodes of that type
        "gpuType": job.gpu_type,
        "timeLimit": format_time_limit(job.time_limit),
        "restartCount": job.restart_count,
        "nodeList": job.node_list,
        "workDir": job.work_dir,
        "submitTime": format_timestamp(job.submit_time),
        "beginTime": format_timestamp(job.begin_time),
        "startTime": format_timestamp(job.start_time),
        "endTime": format_timestamp(job.end_time),
        "expectedStartTime": format_timestamp(job.expected_start),
        "exitCode": f"{job.exit_code}:{job.exit_signal}" if job.exit_code is not None else None,
        # sbatch --mem* (MB), -w/-x, --exclusive, --export, --signal, --mail-*: as scontrol's MinMemoryNode/
        # MinMemoryCPU, ReqNodeList, ExcNodeList, OverSubscribe=NO, MailType, MailUser
        "memPerNode": job.mem_per_node or None, "memPerCpu": job.mem_per_cpu or None,
        "memPerGpu": job.mem_per_gpu or None, "reqNodeList": job.req_nodes, "excNodeList": job.exc_nodes,
        "exclusive": job.exclusive or None, "export": job.export, "signal": job.signal, "mailType": job.mail_type,
        "mailUser": job.mail_user,
        # -C/--constraint as scontrol's Features= (a100&ib)
        "features": job.features,
        "stateDesc": job.state_desc,
        # scontrol's BatchFlag, Command (the script's file and arguments, (null) for salloc, --wrap and a
        # script without a file) and StdIn/StdOut/StdErr, which an salloc job has none of
        "batchFlag": 0 if job.interactive else 1,
        "command": scontrol_job.command_text(job.script_path, job.script_args),
        **({} if job.interactive else _standard_streams(job, job.array_task_id if task_id is None else task_id)),
    }
    return {key: value for key, value in body.items() if value not in (None, "")}


def _standard_streams(job: SlurmJob, task_id: int | None) -> dict[str, str]:
    """scontrol's StdIn, StdOut and StdErr (jobenv.standard_streams)."""
    stdin, stdout, stderr = jobenv.standard_streams(
        stdout_pattern=job.stdout_pattern, stderr_pattern=job.stderr_pattern, work_dir=job.work_dir,
        job_id=job.job_id, job_name=job.name, user=job.user_name, array_job_id=job.array_job_id, task_id=task_id)
    return {"stdIn": stdin, "stdOut": stdout, "stdErr": stderr}


def render_run(run: JobRun) -> dict[str, Any]:
    return {"index": run.index, "state": run.state, "submitTime": format_timestamp(run.submit_time),
            "startTime": format_timestamp(run.start_time), "endTime": format_timestamp(run.end_time),
            "nodeList": run.node_list, "allocCpus": run.alloc_cpus, "allocGpus": run.alloc_gpus,
            "exitCode": f"{run.exit_code}:{run.exit_signal}" if run.exit_code is not None else None,
            "maxRssKb": run.max_rss_kb}
