"""The environment Slurm gives a batch script, and the one it gives Prolog and Epilog. Pure Python.

Batch script (sbatch.1 "OUTPUT ENVIRONMENT VARIABLES"): SLURM_JOB_ID / SLURM_JOBID,
SLURM_JOB_NAME, SLURM_JOB_NODELIST / SLURM_NODELIST (hostlist-compressed), SLURM_JOB_NUM_NODES /
SLURM_NNODES, SLURM_JOB_PARTITION, SLURM_JOB_ACCOUNT, SLURM_JOB_QOS, SLURM_JOB_USER,
SLURM_CLUSTER_NAME, SLURM_SUBMIT_DIR, SLURM_SUBMIT_HOST, SLURM_NTASKS / SLURM_NPROCS, SLURM_GPUS (-G/--gpus's count),
SLURM_GPUS_PER_NODE and SLURM_GPUS_PER_TASK (--gpus-per-node's and --gpus-per-task's),
SLURM_TASKS_PER_NODE and SLURM_JOB_CPUS_PER_NODE in Slurm's ``N(xK)`` form, SLURM_CPUS_ON_NODE,
SLURM_GPUS_ON_NODE, SLURM_JOB_GPUS, CUDA_VISIBLE_DEVICES / GPU_DEVICE_ORDINAL, SLURM_NODEID,
SLURM_PROCID, SLURM_LOCALID, SLURMD_NODENAME, SLURM_RESTART_COUNT (only after a requeue),
SLURM_JOB_START_TIME / SLURM_JOB_END_TIME (epoch seconds).

A task of a job step (``srun`` inside the batch script; srun.1 "OUTPUT ENVIRONMENT VARIABLES"):
the batch script's job variables, and for the step SLURM_STEP_ID / SLURM_STEPID,
SLURM_STEP_NODELIST / SLURM_NODELIST, SLURM_STEP_NUM_NODES / SLURM_NNODES, SLURM_STEP_NUM_TASKS /
SLURM_NTASKS / SLURM_NPROCS, SLURM_STEP_TASKS_PER_NODE / SLURM_TASKS_PER_NODE, SLURM_STEP_GPUS
(the node's GPUs given to the step; CUDA_VISIBLE_DEVICES and GPU_DEVICE_ORDINAL alike),
SLURM_GPUS_ON_NODE, SLURM_NODEID (the node's place in the step), SLURM_PROCID (the task's rank),
SLURM_LOCALID (its rank on the node) and SLURM_GTIDS (the node's task ranks).

Prolog and Epilog (prolog_epilog.shtml): SLURM_JOB_ID, SLURM_JOBID, SLURM_JOB_USER,
SLURM_JOB_ACCOUNT, SLURM_JOB_PARTITION, SLURM_JOB_QOS, SLURM_JOB_NODELIST, SLURM_JOB_NUM_NODES,
SLURM_JOB_CPUS_PER_NODE, SLURM_JOB_START_TIME, SLURM_JOB_END_TIME, SLURM_CLUSTER_NAME,
SLURM_JOB_RESTART_COUNT, SLURM_JOB_WORK_DIR, SLURM_JOB_STDOUT, SLURM_JOB_STDERR,
SLURM_JOB_COMMENT, SLURMD_NODENAME, CUDA_VISIBLE_DEVICES, GPU_DEVICE_ORDINAL, SLURM_JOB_GPUS and
SLURM_SCRIPT_CONTEXT (prolog_slurmd / epilog_slurmd); the Epilog also gets SLURM_JOB_EXIT_CODE
(the wait() status), SLURM_JOB_EXIT_CODE2 (``exit:signal``) and SLURM_JOB_DERIVED_EC. Slurm sets
no PATH for them, and neither does trainhub.
"""

from __future__ import annotations

import posixpath
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trainhub.slurm.arrays import file_pattern
from trainhub.slurm.hostlist import compress

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: salloc's and srun's CLI import this module
if TYPE_CHECKING:
    from pathlib import Path


@dataclass(frozen=True)
class JobContext:
    cluster_name: str
    job_id: int
    job_name: str
    user: str
    account: str
    partition: str
    qos: str
    #: Hostnames of the allocation, batch host first.
    hosts: tuple[str, ...]
    cpus_per_node: tuple[int, ...]
    num_tasks: int
    restart_count: int
    submit_dir: str
    submit_host: str
    stdout_path: str
    stderr_path: str
    comment: str
    start_epoch: int
    #: None: no time limit.
    end_epoch: int | None
    #: The job's uid and gid: its submitter's POSIX identity, as slurmctld keeps it (SlurmJob.uid, gid).
    uid: int
    gid: int
    cpus_per_task: int = 1
    #: sbatch's --ntasks-per-node (0: not given), which sbatch exports as SLURM_NTASKS_PER_NODE.
    ntasks_per_node: int = 0
    #: sbatch's -G/--gpus count (0: not given), which sbatch exports as SLURM_GPUS.
    gpus_per_job: int = 0
    #: sbatch's --gpus-per-node and --gpus-per-task counts (0: not given), exported as
    #: SLURM_GPUS_PER_NODE and SLURM_GPUS_PER_TASK (fixtures/22.05/gpu-env; --gres=gpu:N sets neither).
    gpus_per_node_option: int = 0
    gpus_per_task: int = 0
    #: sbatch's --cpus-per-gpu (0: not given), exported as SLURM_CPUS_PER_GPU, with GPUs or without
    #: (fixtures/22.05/cpus-per-gpu/out-3.txt).
    cpus_per_gpu: int = 0
    #: --mem, --mem-per-cpu and --mem-per-gpu in MB (0: not given), exported as SLURM_MEM_PER_NODE,
    #: SLURM_MEM_PER_CPU and SLURM_MEM_PER_GPU (cpu_memory_request_variables).
    memory: tuple[int, int, int] = (0, 0, 0)


@dataclass(frozen=True)
class NodeContext:
    """The node the script runs on: its index in the allocation and the GPUs it got there."""

    index: int
    gpu_indices: tuple[int, ...]


def repeat_counts(values: list[int]) -> str:
    """Slurm's compressed per-node list: ``[8, 8, 4]`` -> ``"8(x2),4"``."""
    parts: list[str] = []
    index = 0
    while index < len(values):
        run = 1
        while index + run < len(values) and values[index + run] == values[index]:
            run += 1
        parts.append(f"{values[index]}(x{run})" if run > 1 else str(values[index]))
        index += run
    return ",".join(parts)


def tasks_per_node(num_tasks: int, num_nodes: int, room: Sequence[int] | None = None) -> list[int]:
    """Block distribution, as Slurm's default: the first ``num_tasks % num_nodes`` nodes get one more.
    ``room``: how many tasks each node's allocated CPUs hold; a node takes no more, and what it cannot
    take goes to the first nodes with room left (``-n 20`` given 16 + 4 CPUs runs 16,4:
    fixtures/22.05/ntasks/out-2.txt). Room for fewer tasks than asked is ignored."""
    base, extra = divmod(num_tasks, num_nodes)
    counts = [base + (1 if i < extra else 0) for i in range(num_nodes)]
    if room is None or sum(room[:num_nodes]) < num_tasks:
        return counts
    counts = [min(count, limit) for count, limit in zip(counts, room)]
    left = num_tasks - sum(counts)
    for index, limit in enumerate(room[:num_nodes]):
        more = min(left, limit - counts[index])
        counts[index] += more
        left -= more
    return counts


def task_room(cpus_per_node: Sequence[int], cpus_per_task: int) -> list[int]:
    """How many tasks each node's allocated CPUs hold."""
    return [cpus // cpus_per_task for cpus in cpus_per_node]


def _common(job: JobContext, node: NodeContext) -> dict[str, str]:
    gpus = ",".join(str(i) for i in node.gpu_indices)
    env = {
        "SLURM_JOB_ID": str(job.job_id),
        "SLURM_JOBID": str(job.job_id),
        "SLURM_JOB_USER": job.user,
        "SLURM_JOB_ACCOUNT": job.account,
        "SLURM_JOB_PARTITION": job.partition,
        "SLURM_JOB_QOS": job.qos,
        "SLURM_JOB_NODELIST": compress(job.hosts),
        "SLURM_JOB_NUM_NODES": str(len(job.hosts)),
        "SLURM_JOB_CPUS_PER_NODE": repeat_counts(list(job.cpus_per_node)),
        "SLURM_CLUSTER_NAME": job.cluster_name,
        "SLURM_JOB_START_TIME": str(job.start_epoch),
        "SLURMD_NODENAME": job.hosts[node.index],
        "CUDA_VISIBLE_DEVICES": gpus,
        "GPU_DEVICE_ORDINAL": gpus,
        "SLURM_JOB_GPUS": gpus,
    }
    if job.end_epoch is not None:
        env["SLURM_JOB_END_TIME"] = str(job.end_epoch)
    return env


def export_environment(export: str, submission: Mapping[str, str]) -> dict[str, str]:
    """sbatch --export over ``submission`` (the environment a job inherits where it runs): empty or
    ``ALL`` (the default) keeps all of it; ``NONE`` or ``NIL`` none of it; a list exports exactly its
    ``VAR=value`` items and the ``VAR`` it names from ``submission``, and everything else too when it
    holds ``ALL`` (sbatch.1, --export). The SLURM_* variables are the caller's, on top."""
    items = [item for item in export.split(",") if item] if export else ["ALL"]
    env = dict(submission) if "ALL" in items else {}
    for item in items:
        if item in ("ALL", "NONE", "NIL"):
            continue
        name, has_value, value = item.partition("=")
        if has_value:
            env[name] = value
        elif name in submission:
            env[name] = submission[name]
    return env


@dataclass(frozen=True)
class SignalPlan:
    """A job's ``--signal=[R][B:]SIG[@TIME]``: ``signum`` is sent ``seconds`` before its time limit,
    to the batch shell alone (``B:``) or else to every task of its job steps, not the batch shell
    (sbatch.1, --signal)."""

    signum: int
    seconds: int
    batch_only: bool


def signal_plan(stored: str) -> SignalPlan | None:
    """The plan of a --signal as the control plane stores it (``B:USR1@60``, ``10@90``), or None."""
    if not stored:
        return None
    flags, _, rest = stored.rpartition(":")
    name, _, seconds = rest.partition("@")
    signum = int(name) if name.isdigit() else signal.Signals[f"SIG{name}"].value
    return SignalPlan(signum, int(seconds or 60), "B" in flags)


#: The GPU variables: none at all on a node where the job has no GPU (the batch script:
#: fixtures/22.05/ntasks/out-1.txt), nor the step (its tasks: srun-details/env-2.txt, env-3.txt).
GPU_VARIABLES = ("SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "SLURM_GPUS_ON_NODE",
                 "SLURM_JOB_GPUS")


def _batch_tasks_per_node(job: JobContext) -> list[int]:
    """The tasks of each node as the batch script is told: with --ntasks-per-node what each node's CPUs
    hold, however few tasks -n asked (fixtures/22.05/ntasks-per-node/out-1.txt: ``-n 20
    --ntasks-per-node=8`` 8(x3), out-4.txt: ``-n 4 --ntasks-per-node=16`` 16), else the tasks laid out."""
    room = task_room(job.cpus_per_node, job.cpus_per_task)
    return room if job.ntasks_per_node else tasks_per_node(job.num_tasks, len(job.hosts), room)


def batch_environment(job: JobContext, node: NodeContext) -> dict[str, str]:
    """What the batch script sees (it runs on the batch host: node index 0, task 0)."""
    env = _common(job, node)
    env.update({
        "SLURM_JOB_NAME": job.job_name,
        "SLURM_NODELIST": env["SLURM_JOB_NODELIST"],
        "SLURM_NNODES": str(len(job.hosts)),
        "SLURM_SUBMIT_DIR": job.submit_dir,
        "SLURM_SUBMIT_HOST": job.submit_host,
        "SLURM_NTASKS": str(job.num_tasks),
        "SLURM_NPROCS": str(job.num_tasks),
        "SLURM_TASKS_PER_NODE": repeat_counts(_batch_tasks_per_node(job)),
        "SLURM_CPUS_ON_NODE": str(job.cpus_per_node[node.index]),
        "SLURM_GPUS_ON_NODE": str(len(node.gpu_indices)),
        "SLURM_NODEID": str(node.index),
        "SLURM_PROCID": "0",
        "SLURM_LOCALID": "0",
        "SLURM_GTIDS": "0",
    })
    if job.restart_count:
        env["SLURM_RESTART_COUNT"] = str(job.restart_count)
    if job.ntasks_per_node:
        env["SLURM_NTASKS_PER_NODE"] = str(job.ntasks_per_node)
    # fixtures/22.05/gpus-per-job/out-3.txt: SLURM_GPUS=10 on each node's share
    env.update(gpu_request_variables(job.gpus_per_job, job.gpus_per_node_option, job.gpus_per_task))
    if not node.gpu_indices:  # no GPU variable at all (fixtures/22.05/ntasks/out-1.txt)
        for name in GPU_VARIABLES:
            env.pop(name, None)
    env.update(cpu_memory_request_variables(job.cpus_per_gpu, job.memory))
    return env


def gpu_request_variables(gpus_per_job: int, gpus_per_node_option: int, gpus_per_task: int) -> dict[str, str]:
    """SLURM_GPUS, SLURM_GPUS_PER_NODE and SLURM_GPUS_PER_TASK, each only where -G/--gpus,
    --gpus-per-node or --gpus-per-task asked it (none for --gres=gpu:N), as sbatch and salloc set them
    (fixtures/22.05/gpu-env: env-*.txt and salloc-*.txt)."""
    counts = {"SLURM_GPUS": gpus_per_job, "SLURM_GPUS_PER_NODE": gpus_per_node_option,
              "SLURM_GPUS_PER_TASK": gpus_per_task}
    return {name: str(count) for name, count in counts.items() if count}


def cpu_memory_request_variables(cpus_per_gpu: int, memory: tuple[int, int, int]) -> dict[str, str]:
    """SLURM_CPUS_PER_GPU where --cpus-per-gpu asked it, with GPUs or without
    (fixtures/22.05/cpus-per-gpu: out-3.txt, salloc.txt), and SLURM_MEM_PER_NODE, SLURM_MEM_PER_CPU and
    SLURM_MEM_PER_GPU, each only where --mem, --mem-per-cpu or --mem-per-gpu (``memory``, in that
    order) asked it, in MB whatever unit was given (``--mem=2G``: 2048), as sbatch and salloc set them
    (fixtures/22.05/mem-env: env-*.txt and salloc-*.txt); a default from the cluster (DefMemPerCPU)
    sets none."""
    values = {"SLURM_CPUS_PER_GPU": cpus_per_gpu, "SLURM_MEM_PER_NODE": memory[0], "SLURM_MEM_PER_CPU": memory[1],
              "SLURM_MEM_PER_GPU": memory[2]}
    return {name: str(value) for name, value in values.items() if value}


def salloc_environment(*, cluster_name: str, job_id: int, job_name: str, account: str, partition: str, qos: str,
                       hosts: list[str], cpus_per_node: list[int], num_tasks: int, submit_dir: str,
                       submit_host: str, cpus_per_task: int = 1, tasks_given: bool = False,
                       ntasks_per_node: int | None = None, node_aliases: bool = True,
                       gpus: tuple[int, int, int] = (0, 0, 0), cpus_per_gpu: int = 0,
                       memory: tuple[int, int, int] = (0, 0, 0)) -> dict[str, str]:
    """What salloc gives its command, which runs where salloc runs (fixtures/22.05/salloc/salloc-3.txt):
    the allocation's job variables, none of a node's (no SLURM_NODEID, SLURMD_NODENAME, GPUs);
    SLURM_SUBMIT_DIR and SLURM_SUBMIT_HOST are salloc's own directory and host. SLURM_NTASKS and
    SLURM_NPROCS only where the tasks were asked for (``tasks_given``: -n or --ntasks-per-node),
    SLURM_NTASKS_PER_NODE only where that was given (fixtures/22.05/srun-details/salloc-9.txt,
    salloc-10.txt). ``node_aliases``: SLURM_NODE_ALIASES, which salloc sets and srun outside an
    allocation does not give its tasks (srun-details/env-1.txt). ``gpus``: the GPUs asked by -G,
    --gpus-per-node and --gpus-per-task (gpu_request_variables); ``cpus_per_gpu``: --cpus-per-gpu's
    SLURM_CPUS_PER_GPU (fixtures/22.05/cpus-per-gpu/salloc.txt); ``memory``: --mem, --mem-per-cpu and
    --mem-per-gpu (cpu_memory_request_variables)."""
    nodelist = compress(hosts)
    env = {
        "SLURM_CLUSTER_NAME": cluster_name,
        "SLURM_JOBID": str(job_id),
        "SLURM_JOB_ACCOUNT": account,
        "SLURM_JOB_CPUS_PER_NODE": repeat_counts(cpus_per_node),
        "SLURM_JOB_ID": str(job_id),
        "SLURM_JOB_NAME": job_name,
        "SLURM_JOB_NODELIST": nodelist,
        "SLURM_JOB_NUM_NODES": str(len(hosts)),
        "SLURM_JOB_PARTITION": partition,
        "SLURM_JOB_QOS": qos,
        "SLURM_NNODES": str(len(hosts)),
        "SLURM_NODELIST": nodelist,
        "SLURM_NODE_ALIASES": "(null)",
        "SLURM_SUBMIT_DIR": submit_dir,
        "SLURM_SUBMIT_HOST": submit_host,
        "SLURM_TASKS_PER_NODE": repeat_counts(tasks_per_node(num_tasks, len(hosts),
                                                             task_room(cpus_per_node, cpus_per_task))),
    }
    if tasks_given:
        env["SLURM_NTASKS"] = env["SLURM_NPROCS"] = str(num_tasks)
    if ntasks_per_node is not None:
        env["SLURM_NTASKS_PER_NODE"] = str(ntasks_per_node)
    if not node_aliases:
        del env["SLURM_NODE_ALIASES"]
    env.update(gpu_request_variables(*gpus))
    env.update(cpu_memory_request_variables(cpus_per_gpu, memory))
    return env


@dataclass(frozen=True)
class StepContext:
    """One node's part of a job step: the step's nodes and task counts, and this node's tasks."""

    step_id: int
    hosts: tuple[str, ...]
    tasks_per_node: tuple[int, ...]
    #: SLURM_NODEID: this node's place in ``hosts``.
    node_index: int
    #: SLURM_PROCID of this node's tasks, in SLURM_LOCALID order.
    task_ids: tuple[int, ...]
    gpu_indices: tuple[int, ...]


#: What slurmd gives the batch script alone: a step's tasks have it only where srun had it in its
#: own environment (srun inside the batch script; srun outside an allocation has none of it, and its
#: own SLURM_SUBMIT_DIR and SLURM_SUBMIT_HOST: fixtures/22.05/srun-details/env-1.txt).
BATCH_ONLY = ("SLURM_JOB_GPUS", "SLURM_JOB_START_TIME", "SLURM_JOB_END_TIME", "SLURM_SUBMIT_DIR",
              "SLURM_SUBMIT_HOST", "SLURM_RESTART_COUNT")


def step_environments(job: JobContext, node: NodeContext, step: StepContext) -> list[dict[str, str]]:
    """What slurmstepd gives each of a node's tasks of a step, in SLURM_LOCALID order, over srun's
    own environment (which its caller adds beneath): the job's and the step's variables, the
    node's (SLURMD_NODENAME, SLURM_TOPOLOGY_ADDR), and the job's uid and gid, its submitter's
    (srun-details/env-1.txt: alice's SLURM_JOB_UID=1001 SLURM_JOB_GID=1001), whatever local user
    the agent runs the tasks as (the project's, when it isolates projects).
    SLURM_TASK_PID is the supervisor's to add (the task's pid: supervisor._prepare_child). Not given
    (srun-details/env-*.txt have them): SLURM_CONF and SLURM_WORKING_CLUSTER (no slurm.conf nor
    slurmctld address on a trainhub node), SLURM_LAUNCH_NODE_IPADDR, SLURM_SRUN_COMM_HOST/PORT and
    SLURM_STEP_LAUNCHER_PORT (srun listens on no port: it talks to the control plane over HTTP(S) only)."""
    env = {name: value for name, value in batch_environment(job, node).items()
           if name not in BATCH_ONLY and name not in GPU_VARIABLES}
    nodelist = compress(step.hosts)
    tasks = str(sum(step.tasks_per_node))
    per_node = repeat_counts(list(step.tasks_per_node))
    env.update({
        "SLURM_STEP_ID": str(step.step_id), "SLURM_STEPID": str(step.step_id),
        "SLURM_STEP_NODELIST": nodelist, "SLURM_NODELIST": nodelist,
        "SLURM_STEP_NUM_NODES": str(len(step.hosts)), "SLURM_NNODES": str(len(step.hosts)),
        "SLURM_STEP_NUM_TASKS": tasks, "SLURM_NTASKS": tasks, "SLURM_NPROCS": tasks,
        "SLURM_STEP_TASKS_PER_NODE": per_node, "SLURM_TASKS_PER_NODE": per_node,
        "SLURM_NODEID": str(step.node_index), "SLURM_GTIDS": ",".join(str(task) for task in step.task_ids),
        "SLURM_TOPOLOGY_ADDR": job.hosts[node.index], "SLURM_TOPOLOGY_ADDR_PATTERN": "node",
        "SLURM_JOB_UID": str(job.uid), "SLURM_JOB_GID": str(job.gid),
    })
    if step.gpu_indices or node.gpu_indices:
        gpus = ",".join(str(i) for i in step.gpu_indices)
        env.update({"SLURM_STEP_GPUS": gpus, "CUDA_VISIBLE_DEVICES": gpus, "GPU_DEVICE_ORDINAL": gpus,
                    "SLURM_GPUS_ON_NODE": str(len(step.gpu_indices))})
    return [{**env, "SLURM_PROCID": str(task), "SLURM_LOCALID": str(local)}
            for local, task in enumerate(step.task_ids)]


def _script_environment(job: JobContext, node: NodeContext, context: str) -> dict[str, str]:
    env = _common(job, node)
    env.update({
        "SLURM_SCRIPT_CONTEXT": context,
        "SLURM_JOB_RESTART_COUNT": str(job.restart_count),
        "SLURM_JOB_WORK_DIR": job.submit_dir,
        "SLURM_JOB_STDOUT": job.stdout_path,
        "SLURM_JOB_STDERR": job.stderr_path,
        "SLURM_JOB_COMMENT": job.comment,
    })
    return env


def prolog_environment(job: JobContext, node: NodeContext) -> dict[str, str]:
    return _script_environment(job, node, "prolog_slurmd")


def epilog_environment(job: JobContext, node: NodeContext, *, exit_code: int, signal: int) -> dict[str, str]:
    """``exit_code``/``signal`` of the batch script: SLURM_JOB_EXIT_CODE is the raw wait() status."""
    env = _script_environment(job, node, "epilog_slurmd")
    env.update({
        "SLURM_JOB_EXIT_CODE": str((exit_code << 8) | signal),
        "SLURM_JOB_EXIT_CODE2": f"{exit_code}:{signal}",
        "SLURM_JOB_DERIVED_EC": str(exit_code),
    })
    return env


def output_path(pattern: str, *, job_id: int, job_name: str, user: str, node: str) -> str:
    """sbatch's filename pattern: %j / %A job id, %x job name, %u user, %N node, %% a percent sign."""
    replacements = {"j": str(job_id), "A": str(job_id), "x": job_name, "u": user, "N": node, "%": "%"}
    out: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "%" and index + 1 < len(pattern) and pattern[index + 1] in replacements:
            out.append(replacements[pattern[index + 1]])
            index += 2
        else:
            out.append(char)
            index += 1
    return "".join(out)


def standard_streams(*, stdout_pattern: str, stderr_pattern: str, work_dir: str, job_id: int, job_name: str,
                     user: str, array_job_id: int | None = None, task_id: int | None = None) -> tuple[str, str, str]:
    """A batch job's stdin, stdout and stderr as scontrol and squeue print them: the patterns resolved in
    the job's directory (``%N`` stays, it differs per node), stderr stdout's when not given
    (fixtures/22.05/squeue-letters/scontrol-1.txt, ntasks/scontrol-1.txt)."""
    def resolved(pattern: str) -> str:
        name = output_path(file_pattern(pattern, array_job_id=array_job_id, task_id=task_id),
                           job_id=job_id, job_name=job_name, user=user, node="%N")
        return posixpath.join(work_dir, name)

    stdout = resolved(stdout_pattern)
    return "/dev/null", stdout, resolved(stderr_pattern) if stderr_pattern else stdout


class OutsideCluster(ValueError):
    """A job's path that would leave its cluster's file system."""


def leaves_cluster(cluster_path: str) -> bool:
    """Whether a path as the job sees it (``/home/uma/out``, ``out/%j.txt`` after substitution)
    could leave the cluster's file system by its text alone: a ``..`` component or a NUL."""
    return ".." in cluster_path.split("/") or "\x00" in cluster_path


def cluster_file(root: Path, cluster_path: str, *, cwd: str = "/") -> Path:
    """A path as the job sees it on the cluster -> that path under ``root``, the directory that holds
    the cluster's file system on this host; relative paths are taken from ``cwd`` (a cluster path).

    Raises OutsideCluster if the path leaves ``root``: by a ``..`` component, or through a symlink
    (every existing component is resolved on this host; call it right before opening the file)."""
    joined = posixpath.join(cwd, cluster_path)
    if leaves_cluster(joined) or not joined.startswith("/"):
        raise OutsideCluster(f"{cluster_path}: the path may not leave the cluster's file system")
    candidate = root / joined.lstrip("/")
    real_root = root.resolve()
    real = candidate.resolve()
    if real != real_root and real_root not in real.parents:
        raise OutsideCluster(f"{cluster_path}: the path leads outside the cluster's file system (through a symlink)")
    return candidate


def output_file(root: Path, pattern: str, *, cwd: str, job_id: int, job_name: str, user: str, node: str) -> Path:
    """--output/--error on this host: the pattern after every ``%`` substitution (output_path), relative
    to the job's working directory ``cwd``, checked by cluster_file (raises OutsideCluster)."""
    return cluster_file(root, output_path(pattern, job_id=job_id, job_name=job_name, user=user, node=node), cwd=cwd)
