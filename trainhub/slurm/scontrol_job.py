"""``scontrol show job [JOBID]`` in Slurm 22.05's layout (slurm:src/api/job_info.c,
slurm_sprint_job_info; fixtures/22.05/scenario/scontrol-job-*.txt): every job a paragraph ending in
a line of three spaces and a blank line. Pure: the fields come in a ScontrolJob."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from trainhub.slurm import mail


@dataclass(frozen=True)
class ScontrolJob:
    job_id: int
    name: str
    user: str
    uid: int
    gid: int
    group: str
    priority: int
    nice: int
    account: str
    qos: str
    state: str
    reason: str
    dependency: str
    requeue: bool
    restarts: int
    batch: bool
    exit_code: str
    run_seconds: int
    time_limit: int | None
    submit: dt.datetime
    eligible: dt.datetime | None
    accrue: dt.datetime | None
    start: dt.datetime | None
    end: dt.datetime | None
    preempt_eligible: dt.datetime | None
    #: When the running job was chosen as a preemption victim (None: not chosen).
    preempt_time: dt.datetime | None
    last_sched_eval: dt.datetime | None
    #: Main, Backfill (it started the job) or Backfill:* (a pending job's last look was backfill's).
    scheduler: str
    partition: str
    alloc_node: str
    alloc_sid: int
    req_nodes: str
    exc_nodes: str
    node_list: str
    sched_nodes: str
    batch_host: str
    num_nodes: str
    num_cpus: int
    num_tasks: str
    cpus_per_task: int
    #: --ntasks-per-node (0: not given) and the CPUs a node must have free for the job (pn_min_cpus:
    #: --cpus-per-task, times --ntasks-per-node for a job of more than one task; ntasks/scontrol-8).
    ntasks_per_node: int
    min_cpus_node: int
    tres: str
    mem_per_node: int
    mem_per_cpu: int
    #: -C as given; None without it (Features=(null)), "" for ``--constraint=`` (constraint/scontrol-14).
    features: str | None
    exclusive: bool
    #: command_text's
    command: str
    work_dir: str
    comment: str
    stdin: str
    stdout: str
    stderr: str
    tres_per_node: str
    #: --gpus's request, which slurmctld keeps instead of a TresPerNode (options/scontrol-10).
    tres_per_job: str = ""
    #: --gpus-per-task's request, which slurmctld keeps instead of a TresPerNode.
    tres_per_task: str = ""
    #: --cpus-per-gpu's count (CpusPerTres=gres:gpu:N, before MemPerTres); 0 without it.
    cpus_per_gpu: int = 0
    #: --mem-per-gpu's MB (MemPerTres=gres:gpu:MB); 0 without it.
    mem_per_gpu: int = 0
    #: --mail-type and the address it mails (--mail-user, else the job's user); "" without --mail-type.
    mail_type: str = ""
    mail_user: str = ""
    array: str = ""


def _time(moment: dt.datetime | None) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S") if moment else "Unknown"


def _duration(seconds: int) -> str:
    days, rest = divmod(max(seconds, 0), 86400)
    text = f"{rest // 3600:02}:{rest % 3600 // 60:02}:{rest % 60:02}"
    return f"{days}-{text}" if days else text


def limit_text(minutes: int | None) -> str:
    """A time limit in minutes as scontrol prints it: ``UNLIMITED``, ``00:30:00``, ``1-00:00:00``."""
    return "UNLIMITED" if minutes is None else _duration(minutes * 60)


def command_text(script_path: str, script_args: Sequence[str]) -> str:
    """The job's command (scontrol's Command=, squeue's %o): the script's path as sbatch resolved it and
    its arguments, blank-separated (print_commandline; fixtures/22.05/command-tres ``./sub/j2.sh a1 b c``);
    ``(null)`` without a file (--wrap, a script on stdin, salloc)."""
    return " ".join([script_path, *script_args]) if script_path else "(null)"


def memory_text(mb: int) -> str:
    """TRES's mem as scontrol prints it (convert_num_unit2 with CONVERT_NUM_UNIT_EXACT: a larger unit
    while the whole part is a multiple of 512, "half values are allowed"): ``16000M``, ``32000M``,
    ``62.50G`` (64000), ``60G``."""
    units, value, unit = "MGTP", float(mb), 0
    while value >= 1024 and int(value) % 512 == 0 and unit < len(units) - 1:
        value, unit = value / 1024, unit + 1
    return f"{value:.2f}{units[unit]}" if value != int(value) else f"{int(value)}{units[unit]}"


def tres_text(*, cpus: int, mem_mb: int, nodes: int, billing: int, gpus: int) -> str:
    """scontrol's TRES= in its order: cpu, mem, node, billing, gres/gpu; zero counts left out."""
    parts = [("cpu", str(cpus)), ("mem", memory_text(mem_mb) if mem_mb else ""), ("node", str(nodes)),
             ("billing", str(billing)), ("gres/gpu", str(gpus) if gpus else "")]
    return ",".join(f"{name}={value}" for name, value in parts if value)


def job_tres_text(*, requested: bool, cpus: int, nodes: int, gpus: int, mem_per_node: int, mem_per_cpu: int,
                  mem_per_gpu: int, node_memory_mb: int, memory_is_consumable: bool) -> str:
    """scontrol's TRES= and squeue's tres-alloc (both slurmctld's tres_req_str while a job waits, its
    tres_alloc_str once it has nodes). ``requested``: a pending (or rejected) job's memory is
    (job_get_tres_mem) --mem-per-gpu x GPUs (options/scontrol-3: ``--gres=gpu:2 --mem-per-gpu=1000M``
    is mem=2000M), --mem x nodes, --mem-per-cpu x CPUs, else the nodes' whole memory (MinMemoryNode=0,
    the nodes' RealMemory); an allocation holds
    memory only where memory is a consumable resource (CR_*_Memory: fixtures/22.05/command-tres,
    ``-N 2 --gres=gpu:3 --mem=2000`` running under CR_CPU is ``cpu=2,node=2,billing=2,gres/gpu=6``).
    Billing is the CPUs (no TRESBillingWeights)."""
    asked = mem_per_gpu * gpus or mem_per_node * nodes or mem_per_cpu * cpus
    if requested:
        mem = asked or node_memory_mb * nodes
    else:
        mem = asked if memory_is_consumable else 0
    return tres_text(cpus=cpus, mem_mb=mem, nodes=nodes, billing=cpus, gpus=gpus)


def requested_gpus(*, nodes: int, num_tasks: int, gpus_per_job: int, gpus_per_task: int, gpus_per_node: int) -> int:
    """The GPUs a job asks for: --gpus's count, --gpus-per-task's for every task, else its GPUs per node
    on each of ``nodes``."""
    return gpus_per_job or (gpus_per_task * num_tasks if gpus_per_task else gpus_per_node * nodes)


def job_cpus_and_tres(*, requested: bool, allocated: tuple[int, int] | None, num_nodes: int, nodes_from_tasks: bool,
                      num_tasks: int, cpus_per_task: int, gpus_per_job: int, gpus_per_task: int, gpus_per_node: int,
                      mem_per_node: int, mem_per_cpu: int, mem_per_gpu: int, node_memory_mb: int,
                      memory_is_consumable: bool, min_nodes: int = 0, tasks_from_nodes: bool = False,
                      ) -> tuple[int, str]:
    """A job's NumCPUs and TRES= (squeue's tres-alloc is the same string): ``allocated``, its current
    run's (CPUs, GPUs) once it has nodes (an --exclusive job gets its nodes' all: constraint/scontrol-19),
    else what it asks: every task's CPUs, --gpus's count, --gpus-per-task's for every task, else its
    GPUs per node on each node. As requested, -n without -N asks for one node (NumNodes= is slurmctld's
    estimate: fixtures/22.05/ntasks/scontrol-4..9, gputype/scontrol-6) and --gpus for its count, not
    its share of each node rounded up (gputype/scontrol-4: ``-N 2 --gpus=tesla:3`` is gres/gpu=3); a node
    range (``min_nodes``) asks for MIN nodes, their memory and GPUs, whatever count it was tried with or
    got, and without -n (``tasks_from_nodes``) for one task's CPUs (node-range/scontrol-wait-N3-4: ``-N 3-4``
    TRES=cpu=1,mem=48000M,node=3 beside NumNodes=4-4 NumTasks=3; sacct.txt's ReqTRES once it ran)."""
    asked_cpus, asked_nodes = requested_cpus_and_nodes(
        num_tasks=num_tasks, cpus_per_task=cpus_per_task, tasks_from_nodes=tasks_from_nodes, num_nodes=num_nodes,
        min_nodes=min_nodes, nodes_from_tasks=nodes_from_tasks)
    nodes = asked_nodes if requested else num_nodes
    if allocated is not None:
        cpus, gpus = allocated
    else:
        cpus = asked_cpus
        gpus = requested_gpus(nodes=nodes, num_tasks=num_tasks, gpus_per_job=gpus_per_job, gpus_per_task=gpus_per_task,
                              gpus_per_node=gpus_per_node)
    return cpus, job_tres_text(requested=requested, cpus=cpus, nodes=nodes, gpus=gpus, mem_per_node=mem_per_node,
                               mem_per_cpu=mem_per_cpu, mem_per_gpu=mem_per_gpu, node_memory_mb=node_memory_mb,
                               memory_is_consumable=memory_is_consumable)


def requested_cpus_and_nodes(*, num_tasks: int, cpus_per_task: int, tasks_from_nodes: bool, num_nodes: int,
                             min_nodes: int, nodes_from_tasks: bool) -> tuple[int, int]:
    """The CPUs and nodes a job asks for (slurmctld's min_cpus and min_nodes, which its TRES request and a
    record that never ran show): its asked tasks' CPUs (asked_tasks); a node range's MIN, one node for
    -n without -N."""
    return (asked_tasks(num_tasks=num_tasks, tasks_from_nodes=tasks_from_nodes, pending=True) * cpus_per_task,
            1 if nodes_from_tasks else min_nodes or num_nodes)


def asked_tasks(*, num_tasks: int, tasks_from_nodes: bool, pending: bool) -> int:
    """The tasks whose CPUs a job counts: a pending node range without -n (``tasks_from_nodes``) asks for
    one task's (node-range/squeue-wait-N3-4: CPUS 1; sacct.txt: ``-N 2-4`` ReqTRES cpu=1), though
    num_tasks counts a task a node; any other job, or one that got its nodes, its num_tasks."""
    return 1 if tasks_from_nodes and pending else num_tasks


#: squeue's TASKS (-O NumTasks) of a count slurmctld never set: NO_VAL printed as the number it is
#: (fixtures/22.05/job-records/squeue-O.txt: ``-N 2 -H`` cancelled, ``--gres=gpu:9`` refused).
NO_VAL = 4294967294


def never_tested(*, state: str, reason: str, node_list: str, start_time: dt.datetime | None, hold: bool,
                 begin_time: dt.datetime, now: dt.datetime) -> bool:
    """Whether no node test ever gave the job nodes (slurmctld's tres_alloc_cnt unset) once it has ended:
    refused at its node test (FAILED BadConstraints, no nodes: the --gres=gpu:9 kind) or cancelled while
    held, waiting on a dependency or before its begin time (fixtures/22.05/finished-jobs/scontrol-4, -5)."""
    rejected = state == "FAILED" and reason == "BadConstraints" and not node_list
    never_ran = state not in ("PENDING", "RUNNING") and start_time is None
    waited = hold or reason in ("Dependency", "DependencyNeverSatisfied") or begin_time > now
    return rejected or (never_ran and waited)


def shown_tasks(*, num_tasks: int, tasks_given: bool, untested: bool, ntasks_per_node: int, cpus_per_task: int,
                allocated_cpus: int | None) -> int | None:
    """NumTasks as slurmctld packs it (job_mgr.c pack_job: details->num_tasks where -n or --ntasks-per-node
    set it, else a pending job's node count, else its allocated nodes, else NO_VAL): None (scontrol's N/A)
    for a job given no tasks that never had a node test (``untested``: never_tested); ``-N 2 -n 3`` and ``-N 2
    --ntasks-per-node=2`` show 3 and 4 in every state, cancelled while held too (fixtures/22.05/job-records).
    Once running with --ntasks-per-node, what its CPUs hold (ntasks-per-node/scontrol-1: ``-n 20`` on 3 x 8
    CPUs, 24)."""
    if untested and not tasks_given:
        return None
    if allocated_cpus is not None and ntasks_per_node:
        return allocated_cpus // cpus_per_task
    return num_tasks


def tres_by_name(text: str) -> str:
    """A TRES string in sacct's order, by name (ReqTRES: fixtures/22.05/gputype/sacct.txt
    ``billing=1,cpu=1,gres/gpu=2,mem=16000M,node=1``)."""
    return ",".join(sorted(text.split(","), key=lambda item: item.partition("=")[0])) if text else ""


def gpu_tres_per(*, request: str, per_job: int, per_node: int, per_task: int) -> tuple[str, str, str]:
    """TresPerJob, TresPerNode and TresPerTask ("": none; squeue's tres-per-* and %b print N/A): the
    one of them the job's GPUs were asked by (--gpus, --gres or --gpus-per-node, --gpus-per-task) is
    the request as written, which slurmctld keeps (fixtures/22.05/gputype: gres:gpu:tesla:2, gres:gpu,
    gres:gpu:02; options/scontrol-13: gres:gpu:x); a job with no ``request`` shows its count."""
    if per_job:
        return request or f"gres:gpu:{per_job}", "", ""
    if per_task:
        return "", "", request or f"gres:gpu:{per_task}"
    return "", (request or f"gres:gpu:{per_node}") if per_node else "", ""


def _memory_line(job: ScontrolJob) -> str:
    """--mem-per-cpu's or --mem's MB as TRES's mem prints them (options/scontrol-1: MinMemoryNode=2G)."""
    if job.mem_per_cpu:
        return f"MinMemoryCPU={memory_text(job.mem_per_cpu)}"
    return f"MinMemoryNode={memory_text(job.mem_per_node) if job.mem_per_node else 0}"


#: scontrol's stderr line for a job id it does not know (exit status 1).
NOT_FOUND = "slurm_load_jobs error: Invalid job id specified\n"


def scontrol_job_text(jobs: Sequence[ScontrolJob], *, asked: str = "", one_liner: bool = False) -> str:
    """The paragraphs; without jobs "No jobs in the system", but nothing when a job was ``asked``
    (scontrol's error goes to stderr: NOT_FOUND)."""
    if not jobs:
        return "" if asked else "No jobs in the system\n"
    return "".join(_paragraph(job, one_liner) for job in jobs)


def _paragraph(job: ScontrolJob, one_liner: bool) -> str:
    """Each line ends in job_info.c's line_end, "\\n   " (a space with -o, --oneliner), the record in
    "\\n\\n" ("\\n" with -o)."""
    started = job.start is not None and job.state != "PENDING"
    lines = [f"JobId={job.job_id} {job.array}JobName={job.name}",
             f"   UserId={job.user}({job.uid}) GroupId={job.group}({job.gid}) MCS_label=N/A",
             f"   Priority={job.priority} Nice={job.nice} Account={job.account} QOS={job.qos}",
             f"   JobState={job.state} Reason={job.reason.replace(' ', '_')} Dependency={job.dependency or '(null)'}",
             f"   Requeue={int(job.requeue)} Restarts={job.restarts} BatchFlag={int(job.batch)} Reboot=0 "
             f"ExitCode={job.exit_code}",
             f"   RunTime={_duration(job.run_seconds)} TimeLimit={limit_text(job.time_limit)} TimeMin=N/A",
             f"   SubmitTime={_time(job.submit)} EligibleTime={_time(job.eligible)}",
             f"   AccrueTime={_time(job.accrue)}",
             f"   StartTime={_time(job.start)} EndTime={_time(job.end)} Deadline=N/A"]
    if started:
        preempted = _time(job.preempt_time) if job.preempt_time else "None"
        lines.append(f"   PreemptEligibleTime={_time(job.preempt_eligible)} PreemptTime={preempted}")
    lines += [f"   SuspendTime=None SecsPreSuspend=0 LastSchedEval={_time(job.last_sched_eval)} "
              f"Scheduler={job.scheduler}",
              f"   Partition={job.partition} AllocNode:Sid={job.alloc_node or '(null)'}:{job.alloc_sid}",
              f"   ReqNodeList={job.req_nodes or '(null)'} ExcNodeList={job.exc_nodes or '(null)'}",
              f"   NodeList={job.node_list}" + (f" SchedNodeList={job.sched_nodes}" if job.sched_nodes else "")]
    if job.batch_host:
        lines.append(f"   BatchHost={job.batch_host}")
    lines += [f"   NumNodes={job.num_nodes} NumCPUs={job.num_cpus} NumTasks={job.num_tasks} "
              f"CPUs/Task={job.cpus_per_task} ReqB:S:C:T=0:0:*:*",
              f"   TRES={job.tres}",
              f"   Socks/Node=* NtasksPerN:B:S:C={job.ntasks_per_node}:0:*:* CoreSpec=*",
              f"   MinCPUsNode={job.min_cpus_node} {_memory_line(job)} MinTmpDiskNode=0",
              f"   Features={'(null)' if job.features is None else job.features} DelayBoot=00:00:00",
              f"   OverSubscribe={'NO' if job.exclusive else 'OK'} Contiguous=0 Licenses=(null) Network=(null)",
              f"   Command={job.command}",
              f"   WorkDir={job.work_dir}"]
    if job.comment:  # job_info.c prints it with a blank after (squeue-letters/scontrol-1)
        lines.append(f"   Comment={job.comment} ")
    if job.batch:
        lines += [f"   StdErr={job.stderr}", f"   StdIn={job.stdin}", f"   StdOut={job.stdout}"]
    lines.append("   Power=")
    if job.cpus_per_gpu:  # fixtures/22.05/cpus-per-gpu/scontrol-4
        lines.append(f"   CpusPerTres=gres:gpu:{job.cpus_per_gpu}")
    if job.mem_per_gpu:
        lines.append(f"   MemPerTres=gres:gpu:{job.mem_per_gpu}")
    if job.tres_per_job:
        lines.append(f"   TresPerJob={job.tres_per_job}")
    if job.tres_per_node:
        lines.append(f"   TresPerNode={job.tres_per_node}")
    if job.tres_per_task:
        lines.append(f"   TresPerTask={job.tres_per_task}")
    if shown := mail.shown_types(job.mail_type):
        lines.append(f"   MailUser={job.mail_user} MailType={shown}")
    if one_liner:
        return " ".join(line.strip() for line in lines) + " \n"
    return "\n".join(lines) + "\n   \n\n"


def scontrol_job_rows(jobs: Iterable[ScontrolJob]) -> list[dict[str, Any]]:
    return [{"jobId": job.job_id, "name": job.name, "user": job.user, "state": job.state, "reason": job.reason,
             "partition": job.partition, "nodeList": job.node_list, "tres": job.tres} for job in jobs]
