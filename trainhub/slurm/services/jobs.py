"""What users do to jobs: sbatch, scancel, scontrol hold / release / requeue / update nice.

Errors carry the message the Slurm command would print ("sbatch: error: Batch job submission
failed: Invalid account or account/partition combination specified").
"""

from __future__ import annotations

import datetime as dt
import posixpath
from dataclasses import dataclass, replace
from functools import cached_property

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from trainhub.common.compiled import CompiledInsert, Numbered
from trainhub.common.errors import ApiError
from trainhub.iam.selectors import posix_account
from trainhub.slurm import arrays, dependency, features, hostlist, jobenv, priority, scheduler, snapshot
from trainhub.slurm import limits
from trainhub.slurm.limits import SubmitRejected, validate_submission
from trainhub.slurm.conf import parse_config
from trainhub.slurm.models import Hold, JobEvent, JobState, SlurmCluster, SlurmJob
from trainhub.slurm.sbatch import (
    MAX_LENGTH,
    PATHNAME_TOO_LONG,
    SbatchError,
    SbatchOptions,
    batch_script,
    check_cpus_per_gpu,
    check_memory,
    nodes_within_tasks,
    parse_begin,
    parse_options,
    script_directives,
    too_long,
)
from trainhub.slurm.services.clusters import JOB_IDS, request_pass, take_fifo_priority, take_job_ids
from trainhub.slurm.services.lifecycle import EVENT_INSERT, job_event, job_requeue, job_stop
from trainhub.slurm.services.mail import mail_job_ended
from trainhub.slurm.services.passes import will_run

SUBMIT_FAILED = "sbatch: error: Batch job submission failed: "
#: What sbatch --test-only prints before slurmctld's refusal in place of SUBMIT_FAILED.
TEST_ONLY_FAILED = "allocation failure: "
PERMISSION_DENIED = "Access/permission denied"
DEPENDENCY_PROBLEM = "Job dependency problem"
NODE_CONFIG_UNAVAILABLE = "Requested node configuration is not available"


#: The job's INSERT, built once per process (save() compiles its 83 columns' statement per sbatch).
_JOB_INSERT = CompiledInsert(SlurmJob)


def _refuse(message: str) -> ApiError:
    return ApiError(400, message, "INVALID_ARGUMENT")


@dataclass(frozen=True)
class Submission:
    """A submission as sbatch receives it: its arguments and, unless --wrap, the script's text.
    ``allocation``: salloc's, an allocation without a batch script (its command runs where salloc runs)."""

    argv: tuple[str, ...] = ()
    script: str | None = None
    script_args: tuple[str, ...] = ()
    #: The script's file as sbatch resolved it (the job's Command with script_args); "": none.
    script_path: str = ""
    allocation: bool = False
    #: Where sbatch/salloc ran: its host's short name and its session id (scontrol's AllocNode:Sid).
    alloc_node: str = ""
    alloc_sid: int = 0
    #: sbatch's working directory (the job's WorkDir without --chdir); "": the user's home.
    submit_dir: str = ""

    @cached_property
    def _read(self) -> tuple[SbatchOptions, list[str]]:
        return _options(self)

    @property
    def options(self) -> SbatchOptions:
        """The options of the command line over the script's #SBATCH lines, read once (job_submit and
        submitted_message both need them); an ApiError with sbatch's message if they are refused."""
        return self._read[0]

    @property
    def warnings(self) -> list[str]:
        """What sbatch (salloc) warns of on stderr as it reads the options, without its name:
        ``Warning: can't run 2 processes on 3 nodes, setting nnodes to 2``."""
        return self._read[1]


#: salloc's options are sbatch's but for those that only make sense for a batch script.
NOT_SALLOC_OPTIONS = ("array", "wrap", "output", "error", "test_only", "parsable")


def _options(submission: Submission) -> tuple[SbatchOptions, list[str]]:
    try:
        command_line, rest = parse_options(list(submission.argv))
        if rest:
            raise SbatchError("sbatch: error: give the batch script as its text (the CLI reads the file), not as "
                              f"an argument: {rest[0]!r}")
        options, warnings = nodes_within_tasks(command_line.over(script_directives(submission.script or "")))
    except SbatchError as exc:
        raise _refuse(str(exc)) from exc
    if too_long(options):
        raise _refuse(SUBMIT_FAILED + PATHNAME_TOO_LONG)
    if submission.allocation:
        given = [name for name in NOT_SALLOC_OPTIONS if getattr(options, name) not in (None, False)]
        if given or submission.script is not None or submission.script_args:
            what = f"--{given[0].replace('_', '-')}" if given else "a batch script"
            raise _refuse(f"salloc: error: salloc takes no {what}: it runs its command where salloc runs")
    return options, warnings


def _work_dir(options: SbatchOptions, submit_dir: str, user: str) -> str:
    """scontrol's WorkDir: --chdir, a relative one taken from where sbatch ran (sbatch makes it a full
    path from its cwd), else where sbatch ran (fixtures/22.05/scenario: sbatch in /tmp, WorkDir=/tmp);
    the user's home for a submission that names no directory (the web form)."""
    here = submit_dir or f"/home/{user}"
    path = posixpath.join(here, options.chdir) if options.chdir else here
    if jobenv.leaves_cluster(path):
        raise _refuse(f"sbatch: error: chdir({options.chdir or path}): no such directory on the cluster")
    path = posixpath.normpath(path)
    if len(path) > MAX_LENGTH["chdir"]:
        raise _refuse(SUBMIT_FAILED + PATHNAME_TOO_LONG)
    return path


#: What %j and %N stand for while a pattern is checked at submit time (digits and a node name
#: cannot add a ``..``; the job name and the user can).
_ANY_JOB_ID, _ANY_NODE = 1, "node"


def _output_pattern(pattern: str | None, flag: str, *, job_name: str, user: str) -> str:
    """--output/--error stay inside the cluster's file system: no ``..`` component, before or after
    any ``%`` substitution (``-J .. --output=/%x/%x/out``). The agent checks again, symlinks
    resolved, when it opens the file (jobenv.output_file)."""
    if not pattern:
        return ""
    path = jobenv.output_path(pattern, job_id=_ANY_JOB_ID, job_name=job_name, user=user, node=_ANY_NODE)
    if jobenv.leaves_cluster(pattern) or jobenv.leaves_cluster(path):
        raise _refuse(f"sbatch: error: {flag}={pattern}: the path may not leave the cluster's file system")
    return pattern


def _hosts(text: str | None) -> list[str]:
    """-w / -x: a hostlist (``gpu[2-3],gpu7``); one that does not parse names no node slurmctld knows."""
    try:
        return hostlist.expand(text) if text else []
    except hostlist.HostlistError as exc:
        raise _refuse(SUBMIT_FAILED + "Invalid node name specified") from exc


def _node_count(options: SbatchOptions, state: snapshot.ClusterState, partition: str, required: list[str], *,
                by_gpus: bool = True) -> tuple[int, bool]:
    """The job's node count, at least its -w nodes, and whether it came from its tasks: -n without -N
    asks for the fewest of the partition's largest nodes the tasks fit on, at most --ntasks-per-node
    of them on each (scheduler.TaskSpread; fixtures/22.05/ntasks: ``-n 40 --ntasks-per-node=8`` asks
    for 5 nodes), by their CPUs alone (``by_gpus`` False: slurmctld's estimate at submission, the job's
    NumNodes until the scheduler tries it: snapshot.scheduled_node_count) or their GPUs too."""
    if options.nodes is not None or options.ntasks is None:
        return max(options.nodes or 1, len(required)), False
    nodes = state.task_nodes(partition, tasks=options.ntasks, cpus_per_task=options.cpus_per_task or 1,
                             gpus_per_task=options.gpus_per_task[1] if options.gpus_per_task and by_gpus else 0,
                             per_node=options.ntasks_per_node or 0)
    return max(nodes, len(required)), True


def _placement(options: SbatchOptions, state: snapshot.ClusterState, partition: str,
               ) -> tuple[SbatchOptions, int, dict]:
    """The options that say where a job may run and how much of a node it takes, its node count
    (_node_count; the job's own counts -n's tasks by their CPUs alone) and those as the job's fields;
    --gpus and --gpus-per-task become GPUs per node
    (--gpus spread evenly over the nodes, or a node range's most, --gpus-per-task times the tasks per
    node), with the GPU
    type and the request as written. Refusals are
    slurmctld's: a node name it does not know, a --constraint over 1024 characters (before the job
    takes an id; its syntax and features are checked with the node configuration), two memory
    options, --cpus-per-gpu with --cpus-per-task (sbatch's)."""
    try:
        check_memory(options)
        check_cpus_per_gpu(options)
    except SbatchError as exc:
        raise _refuse(str(exc)) from exc
    if options.constraint is not None and len(options.constraint) > features.MAX_CONSTRAINT_LENGTH:
        raise _refuse(SUBMIT_FAILED + features.TOO_LONG)
    known = {node.name for node in state.nodes.values()}
    required, excluded = _hosts(options.nodelist), _hosts(options.exclude)
    if not set(required + excluded) <= known:
        raise _refuse(SUBMIT_FAILED + "Invalid node name specified")
    nodes, from_tasks = _node_count(options, state, partition, required)
    if options.gpus is not None:
        # over -N's nodes, or, for a node range (no -N: the partition's), over the most it may take
        most = nodes if options.nodes is not None and options.max_nodes == options.nodes else (
            options.max_nodes or len(state.partitions[partition].node_pks))
        options = replace(options, gpu_type=options.gpus[0], gpus_per_node=-(-options.gpus[1] // max(most, nodes)))
    elif options.gpus_per_task is not None:
        tasks_per_node = -(-(options.ntasks or nodes * (options.ntasks_per_node or 1)) // nodes)
        options = replace(options, gpu_type=options.gpus_per_task[0],
                          gpus_per_node=options.gpus_per_task[1] * tasks_per_node)
    estimate = _node_count(options, state, partition, required, by_gpus=False)[0] if options.gpus_per_task else nodes
    # -N MIN-MAX, or --gpus without -N (1 to the partition's nodes: snapshot.gpu_node_range): models.SlurmJob.min_nodes
    ranged = bool(options.max_nodes and options.max_nodes > nodes) or (options.gpus is not None and options.nodes is None)
    return options, nodes, dict(
        num_nodes=estimate, nodes_from_tasks=from_tasks, max_nodes=options.max_nodes or 0,
        min_nodes=nodes if ranged else 0,
        tasks_from_nodes=ranged and options.ntasks is None and not options.ntasks_per_node,
        ntasks_per_node=options.ntasks_per_node or 0,
        gpus_per_job=options.gpus[1] if options.gpus else 0,
        gpus_per_task=options.gpus_per_task[1] if options.gpus_per_task else 0,
        cpus_per_gpu=options.cpus_per_gpu or 0,
        gpus_per_node_option=options.gpus_per_node_option or 0,
        gpu_type=options.gpu_type or "", gpu_request=options.gpu_request or "",
        mem_per_node=options.mem or 0, mem_per_cpu=options.mem_per_cpu or 0, mem_per_gpu=options.mem_per_gpu or 0,
        req_nodes=hostlist.compress(required), exc_nodes=hostlist.compress(excluded), exclusive=bool(options.exclusive),
        export=options.export or "", signal=options.signal or "", mail_type=options.mail_type or "",
        mail_user=options.mail_user or "",
        features=None if options.constraint is None else features.stored_constraint(options.constraint))


def _feature_error(request: SbatchOptions, members: list[snapshot.NodeInfo],
                   ) -> tuple[str | None, features.Constraint | None]:
    """-C/--constraint: slurmctld's Invalid feature specification for bad syntax or a feature no node
    of the partition has (fixtures/22.05/constraint: ``tpu``, ``a100&&ib``); else the parsed constraint."""
    if not request.constraint:
        return None, None
    try:
        constraint = features.parse_constraint(request.constraint)
    except features.FeatureError as exc:
        return str(exc), None
    if not constraint.names <= {name for node in members for name in node.available_features}:
        return features.INVALID_FEATURE, None
    return None, constraint


def _placed_node_count(options: SbatchOptions, nodes: int) -> int:
    """The nodes a job of ``nodes`` will be given: at least the sum of its constraint's counts
    (fixtures/22.05/constraint-syntax/count-1: ``-C a100*2`` alone runs on 2 nodes; squeue-wait: it
    pends showing 1, as slurmctld raises the count when it allocates, and so does trainhub's scheduler)."""
    if not options.constraint:
        return nodes
    try:
        return features.parse_constraint(options.constraint).node_count(nodes)
    except features.FeatureError:
        return nodes  # _node_config_error refuses it with slurmctld's message


def _node_config_error(request: SbatchOptions, nodes: int, state: snapshot.ClusterState, partition: str, *,
                       held: bool, counted: int, from_tasks: bool = False, max_nodes: int | None = None) -> str | None:
    """What no node of the partition can satisfy (slurmctld refuses it at submit): too few nodes, an
    invalid constraint, a -w node outside the partition or too small, too few nodes big enough
    (memory only where it is a consumable resource) or with the constraint's features (a matching OR
    none of whose alternatives has enough nodes, counts that too few nodes meet). -x is no
    reason to refuse (fixtures/22.05/options: ``-x gpu[1-4]`` is accepted), and a held job is not
    tested against the nodes (fixtures/22.05/constraint: held ``-C a100&v100`` and ``-N 3 -C a100``
    are accepted, unheld refused). More nodes than the partition has is no node configuration error here:
    -N's count is a partition limit, limits.partition_limit's (refused under EnforcePartLimits after the
    account and QOS, else pending with PartitionNodeLimit: fixtures/22.05/part-order, finished-jobs nodes5);
    a count from -n alone (``from_tasks``) is accepted and pends with PartitionConfig (fixtures/22.05/ntasks:
    ``-n 65``, ``-n 5 -c 16``); one from -n and --ntasks-per-node is refused as no node configuration (``-n 40
    --ntasks-per-node=8``: the select plugin's node test wants its 5 nodes). ``nodes`` is the count the job will
    be given, raised by its constraint's counts (_placed_node_count), ``counted`` the count before them:
    counts more than the partition has are tested as the nodes' configuration, not the partition's
    (fixtures/22.05/part-edge: ``-C a100*5`` on 4 nodes is refused as ``Requested node configuration is not
    available`` under EnforcePartLimits=NO and ALL). ``max_nodes``: the most nodes the node test may give the job,
    the partition's MaxNodes (select_nodes confines it so), None where partition_limit keeps the job waiting before
    the test: a count from -n alone more than that is no partition limit but no node configuration either
    (fixtures/22.05/part-more: with MaxNodes=2, ``-n 40``, 3 nodes of 16 CPUs, is refused as ``Requested node
    configuration is not available`` under EnforcePartLimits=NO and ALL, while part-edge's ``-n 40 -t 10`` under
    MaxTime=5 and NO pends with PartitionConfig)."""
    members = [state.nodes[pk] for pk in state.partitions[partition].node_pks]
    error, constraint = _feature_error(request, members)  # first, whatever the count (bad-input: -N 5 -C bogus)
    if counted > len(members):
        return error or (NODE_CONFIG_UNAVAILABLE if from_tasks and request.ntasks_per_node else None)
    if error or held:
        return error
    if from_tasks and max_nodes is not None and counted > max_nodes:
        return NODE_CONFIG_UNAVAILABLE
    required = set(_hosts(request.nodelist))
    # --ntasks-per-node's tasks' CPUs on every node (slurmctld's pn_min_cpus), or --cpus-per-gpu's for
    # its GPUs there (fixtures/22.05/cpus-per-gpu/sbatch-big: 17 CPUs for one GPU on nodes of 16)
    tasks_per_node = max(-(-(request.ntasks or nodes) // nodes), request.ntasks_per_node or 0)
    cpus = scheduler.cpus_for_gpus(tasks_per_node * (request.cpus_per_task or 1), request.gpus_per_node or 0,
                                   request.cpus_per_gpu or 0)
    # --mem against each node's RealMemory even where memory is not consumable (node_scheduler.c
    # _build_node_list: finished-jobs/sbatch-mem, --mem=20000 on nodes of 16000 under CR_CPU)
    memory = request.mem or ((request.mem_per_cpu or 0) * cpus or (request.mem_per_gpu or 0) * (
        request.gpus_per_node or 0) if state.config.memory_is_consumable else 0)
    fitting = [node for node in members
               if node.gpus >= (request.gpus_per_node or 0)
               and (request.gpu_type is None or node.gpu_type == request.gpu_type)
               and node.cpus >= cpus and node.memory_mb >= memory]
    if constraint is not None:
        placed = constraint.choose([(node.name, frozenset(node.active_features)) for node in fitting], nodes,
                                   frozenset(required))
        return None if placed is not None else NODE_CONFIG_UNAVAILABLE
    names = {node.name for node in fitting}
    return NODE_CONFIG_UNAVAILABLE if len(fitting) < nodes or not required <= names else None


#: slurmctld's words, before the refusal, for a job whose every node needs more CPUs than any node has.
CPU_COUNT_UNSATISFIED = "sbatch: error: CPU count per node can not be satisfied\n"
#: ... and for one whose --mem is more than any node's RealMemory (finished-jobs/sbatch-mem.err).
MEMORY_UNSATISFIED = "sbatch: error: Memory specification can not be satisfied\n"


def _cpus_per_task(request: SbatchOptions) -> int:
    """A task's CPUs as slurmctld's node test counts them: -c, else --gpus-per-task x --cpus-per-gpu."""
    return request.cpus_per_task or (request.gpus_per_task[1] * request.cpus_per_gpu
                                     if request.gpus_per_task and request.cpus_per_gpu else 1)


def _refused_node_count(request: SbatchOptions, state: snapshot.ClusterState, partition: str) -> int:
    """The nodes the record of a job refused at its node test shows (NumNodes, squeue's NODES): -n's tasks
    over the partition's biggest node, at least one a node where a task needs more CPUs than it has
    (fixtures/22.05/small-diffs: ``-n 3 --gpus-per-task=1 --cpus-per-gpu=100`` 3 nodes, ``-N 1 -n 17``
    2; without -n, ``-c 17`` and ``--ntasks-per-node=17`` 1); 1 without -n."""
    if not request.ntasks:
        return 1
    biggest = max((state.nodes[pk].cpus for pk in state.partitions[partition].node_pks), default=0)
    return -(-request.ntasks // max(1, biggest // _cpus_per_task(request)))


def _unsatisfied_lines(request: SbatchOptions, state: snapshot.ClusterState, partition: str) -> str:
    """slurmctld's lines before a node test's refusal: CPU_COUNT_UNSATISFIED where the CPUs the job needs
    on each node (its pn_min_cpus: a task's CPUs, -c or --gpus-per-task x --cpus-per-gpu, times
    --ntasks-per-node) are more than the partition's biggest node has (fixtures/22.05/small-diffs/sbatch-*.err:
    ``-c 17``, ``--ntasks-per-node=17``, ``--gpus-per-task=2 --cpus-per-gpu=9`` on nodes of 16 say it;
    ``-N 1 -n 17`` and, in cpus-per-gpu/sbatch-big, ``--gres=gpu:1 --cpus-per-gpu=17`` fail without it),
    MEMORY_UNSATISFIED where --mem is more than any of its nodes has; "" if neither."""
    per_task = _cpus_per_task(request)
    members = [state.nodes[pk] for pk in state.partitions[partition].node_pks]
    biggest = max((node.cpus for node in members), default=0)
    most_memory = max((node.memory_mb for node in members), default=0)
    return ((CPU_COUNT_UNSATISFIED if per_task * (request.ntasks_per_node or 1) > biggest else "")
            + (MEMORY_UNSATISFIED if (request.mem or 0) > most_memory else ""))


def _dependency(cluster: SlurmCluster, options: SbatchOptions) -> str:
    """--dependency as slurmctld stores it; every job it names must exist."""
    if not options.dependency:
        return ""
    try:
        depends = dependency.parse_dependency(options.dependency or "")
    except dependency.DependencyError as exc:
        raise _refuse(SUBMIT_FAILED + DEPENDENCY_PROBLEM) from exc
    wanted = dependency.job_ids(depends)
    if len(depends) > SlurmJob._meta.get_field("dependency").max_length or len(
            SlurmJob.objects.filter(cluster=cluster, job_id__in=wanted)) != len(wanted):
        raise _refuse(SUBMIT_FAILED + DEPENDENCY_PROBLEM)
    return depends


def _submission_priority(state: snapshot.ClusterState, job: SlurmJob, now: dt.datetime) -> tuple[Numbered, ...]:
    """The priority slurmctld gives a job as it makes its record (job_create -> _set_job_prio ->
    priority_p_set, as of now). Returns the fields besides job_id that the job's id numbers as the
    job takes it (CompiledInsert's Numbered).

    priority/multifactor: from what its last decay run left, each association's fs_factor and the
    norms (SlurmCluster.priority_norms), so no read of the whole cluster. A job pending until the
    next decay run shows it (fixtures/22.05/sched/c-scontrol-15: Priority=1428 before any pass), and
    so does one whose node test then fails (scenario/scontrol-job-3-running). Before the first decay
    run the next pass gives it.

    priority/basic: FIFO, one less than the last value given (snapshot.BASIC_TOP_PRIORITY less the
    cluster's fifo_priorities, which it counts down), less its nice, in the statement that takes the
    id (fixtures/22.05/prio-basic); a held job's is 0 and it takes no value, so the next job takes
    the one it would have (fixtures/22.05/prio-held: sbatch, sbatch -H, sbatch give -1, 0, -2)."""
    if state.config.priority_type == "priority/basic":
        job.priority_time = now
        return () if job.hold != Hold.NONE else (("fifo_priority", snapshot.BASIC_TOP_PRIORITY),
                                                 ("priority", snapshot.BASIC_TOP_PRIORITY - job.nice))
    if state.cluster.priority_norms:
        snapshot.set_priorities([job], state, snapshot.association_terms(state),
                                snapshot.priority_context(state, state.cluster.priority_norms), now)
    return ()


def _job_record(cluster: SlurmCluster, *, user: AbstractBaseUser, options: SbatchOptions, submission: Submission,
                script: str, now: dt.datetime, begin: dt.datetime, **values) -> SlurmJob:
    """The unsaved record of the job as submitted; its limits are checked on it (snapshot.job_tres)
    before _job_write gives it its id (and an array's tasks, _array_fields)."""
    username = user.get_username()
    identity = posix_account(user=user)
    # sbatch names a job after its script file (base_name(script_name)), "sbatch" for one on stdin
    name = options.job_name or ("interactive" if submission.allocation else "wrap" if options.wrap is not None
                                else posixpath.basename(submission.script_path) or "sbatch")
    return SlurmJob(
        cluster=cluster, name=name, submitted_by=user, user_name=username, uid=identity.uid,
        gid=identity.gid, group_name=identity.group,
        script=script, script_args=list(submission.script_args), script_path=submission.script_path,
        work_dir=_work_dir(options, submission.submit_dir, username),
        stdout_pattern=_output_pattern(options.output, "--output", job_name=name, user=username) or (
            "slurm-%A_%a.out" if options.array is not None else "slurm-%j.out"),
        stderr_pattern=_output_pattern(options.error, "--error", job_name=name, user=username),
        comment=options.comment or "", submit_time=now, begin_time=begin, interactive=submission.allocation,
        salloc_seen=now if submission.allocation else None, alloc_node=submission.alloc_node[:255],
        alloc_sid=submission.alloc_sid, **values)


def _array_fields(array: arrays.ArraySpec | None) -> dict:
    """An array's one record for all its tasks: the tasks it has and those still pending in it."""
    if array is None:
        return {}
    tasks = arrays.compress(array.task_ids)
    return {"array_pending": tasks, "array_tasks": tasks, "array_max_running": array.max_running}


def _job_write(job: SlurmJob, cluster_state: snapshot.ClusterState, *, now: dt.datetime, event: str = "",
               **values) -> SlurmJob:
    """``job`` (_job_record) with ``values`` written under the cluster's next job id, with its priority
    (_submission_priority) and its first event when ``event`` is given.

    With its event, the job takes its id in the statement that writes both (on PostgreSQL; see
    CompiledInsert.save_with), so the cluster's counter row is locked only while that statement
    runs, not for a transaction around it: concurrent sbatch calls do not queue behind each other.
    """
    for field, value in values.items():
        setattr(job, field, value)
    numbered: tuple[Numbered, ...] = ("job_id", "array_job_id") if job.array_tasks else ("job_id",)
    numbered += _submission_priority(cluster_state, job, now)
    counter = (JOB_IDS, job.cluster_id, numbered)
    if event:
        _JOB_INSERT.save_with(job, JobEvent(time=now, message=event), EVENT_INSERT, numbered_by=counter)
    else:
        _JOB_INSERT.save(job, numbered_by=counter)
    return job


def submitted_message(job: SlurmJob, submission: Submission) -> str:
    """What sbatch prints on stdout for an accepted job: ``Submitted batch job N``, or with --parsable
    only the job id (``jobid[;cluster]``: the cluster only with -M, which trainhub has no need of);
    nothing for --test-only (see will_run_message)."""
    options = submission.options
    if options.test_only or submission.allocation:
        return ""
    return str(job.job_id) if options.parsable else f"Submitted batch job {job.job_id}"


def will_run_message(job: SlurmJob) -> str:
    """sbatch --test-only's line, which it prints on stderr (fixtures/22.05/array/test-only-*.err):
    ``sbatch: Job N to start at 2026-12-04T20:29:58 using 1 processors on nodes gpu3 in partition batch``."""
    return (f"sbatch: Job {job.job_id} to start at {job.expected_start:%Y-%m-%dT%H:%M:%S} using "
            f"{job.num_tasks * job.cpus_per_task} processors on nodes {job.expected_nodes} in partition "
            f"{job.partition}")


def _test_only(cluster: SlurmCluster, state: snapshot.ClusterState, probe: SlurmJob, accepted: limits.Submission,
               now: dt.datetime) -> SlurmJob:
    """--test-only: the job is not queued, but its test takes a job id, as in slurmctld (the id is
    used up: the next job's is one more). Returns the unsaved job with its expected start and nodes."""
    probe.job_id = take_job_ids(cluster, 1)
    probe.account, probe.qos, probe.time_limit = accepted.account, accepted.qos or "", accepted.time_limit_minutes
    probe.submit_time = probe.begin_time = now
    found = will_run(cluster, state, probe, now)
    if found is None:
        raise _refuse(SUBMIT_FAILED + NODE_CONFIG_UNAVAILABLE)
    probe.expected_start, plan = found
    probe.expected_nodes = hostlist.compress(plan.nodes if isinstance(plan, scheduler.Start) else plan.planned_nodes)
    return probe


def job_submit(*, cluster: SlurmCluster, user: AbstractBaseUser, submission: Submission, is_admin: bool = False,
               now: dt.datetime | None = None) -> SlurmJob:
    """sbatch: parse the options, validate them as slurmctld does (limits.validate_submission:
    association, QOS, partition and submit-count limits) and queue the job under the cluster's next
    job id. The job pends with the reason known at submit time (a limit, BeginTime, JobHeldUser)."""
    try:
        return _job_submit(cluster=cluster, user=user, submission=submission, is_admin=is_admin, now=now)
    except ApiError as exc:
        if not submission.options.test_only:
            raise
        # --test-only asks slurm_job_will_run, whose refusal sbatch prints with slurm_perror("allocation
        # failure") (22.05.8: ``--test-only -N 5`` on 4 nodes, ``--gres=gpu:9``, ``-c 17``: "allocation failure:
        # Requested node configuration is not available"; ``-p nope``: "allocation failure: Invalid partition
        # name specified" after sbatch's own line)
        raise replace(exc, message=exc.message.replace(SUBMIT_FAILED, TEST_ONLY_FAILED)) from None


def _job_submit(*, cluster: SlurmCluster, user: AbstractBaseUser, submission: Submission, is_admin: bool,
                now: dt.datetime | None) -> SlurmJob:
    now = now or timezone.now()
    options = submission.options
    try:
        script = "" if submission.allocation else batch_script(script=submission.script, options=options)
        begin = parse_begin(options.begin, now) if options.begin else now
    except SbatchError as exc:
        raise _refuse(str(exc)) from exc
    if options.nice is not None and options.nice < 0 and not is_admin:
        raise _refuse(SUBMIT_FAILED + PERMISSION_DENIED)
    username = user.get_username()
    partition = options.partition or cluster.default_partition
    # -A names the account: the user's DefaultAccount would not be used.
    state, default_account = snapshot.load_for_submission(cluster, partition=partition, user=username, now=now,
                                                          default_account=not options.account)
    if partition not in state.partitions:
        raise _refuse(f"sbatch: error: invalid partition specified: {partition}\n"
                      f"{SUBMIT_FAILED}Invalid partition name specified")
    try:
        array = (arrays.parse_array(options.array, max_array_size=state.config.max_array_size)
                 if options.array is not None else None)
    except arrays.ArrayError as exc:
        raise _refuse(SUBMIT_FAILED + str(exc)) from exc
    options, nodes, placement = _placement(options, state, partition)
    fields = dict(num_tasks=options.ntasks or nodes * (options.ntasks_per_node or 1),
                  tasks_given=options.ntasks is not None or bool(options.ntasks_per_node),
                  cpus_per_task=options.cpus_per_task or 1, gpus_per_node=options.gpus_per_node or 0, **placement)
    context = snapshot.limit_context(state)
    active: list[SlurmJob] = []
    if snapshot.has_submit_count_limits(context):
        # Counting the queue against GrpSubmitJobs / MaxSubmitJobs needs every job's association.
        state = snapshot.load_cluster(cluster, now=now)
        context = snapshot.limit_context(state)
        active = list(SlurmJob.objects.filter(cluster=cluster, state__in=[JobState.PENDING, JobState.RUNNING]))
    job = _job_record(cluster, user=user, options=options, submission=submission, script=script, now=now,
                      begin=begin, account=options.account or "", partition=partition, **fields)
    try:
        accepted = validate_submission(
            context, snapshot.limit_usage(state, context, active), user=username, account=options.account,
            partition=partition, qos=options.qos, nodes=nodes, tres=snapshot.job_tres(job, state),
            time_limit_minutes=options.time_limit, default_account=default_account,
            most_nodes=options.max_nodes or 0, partition_nodes=len(state.partitions[partition].node_pks),
            from_tasks=placement["nodes_from_tasks"],
            partition_cpus=state.partitions[partition].tres_totals["cpu"])
    except SubmitRejected as exc:
        raise _refuse(SUBMIT_FAILED + exc.message) from exc
    most = state.partitions[partition].options.max_nodes
    # the node test confines a count from -n to MaxNodes, but not where the partition's limits keep the job
    # waiting before it (limits.partition_limit's answer, the submission's pending reason)
    node_error = _node_config_error(options, _placed_node_count(options, nodes), state, partition,
                                    held=bool(options.hold), counted=nodes, from_tasks=placement["nodes_from_tasks"],
                                    max_nodes=None if limits.over_partition_limits(accepted.pending_reason) else most)
    limited = accepted.pending_reason and not limits.counted_after_selection(accepted.pending_reason)
    if placement["min_nodes"] and options.gpus is None and not options.hold and not limited and (
            most is None or options.max_nodes <= most):
        # slurmctld's node test at submission (job_allocate's test-only select_nodes) gives a node range the
        # count it shows until it runs (snapshot.node_range_count); a held job has none, nor one its limits
        # keep waiting before the node selection (a node limit, a job count: fixtures/22.05/range-limits
        # mn-N3-4 shows NumNodes=3-4; a TRES limit waits after it, job-records-mem mem-N3-4 4-4) or whose MAX
        # is over the partition's MaxNodes (_part_access_check fails first, PartitionNodeLimit; pm-N1-4 shows
        # NumNodes=1-4)
        job.num_nodes = snapshot.node_range_count(state, partition, low=nodes, high=options.max_nodes,
                                                  excluded=placement["exc_nodes"])
    if options.test_only:
        if node_error:
            raise _refuse(SUBMIT_FAILED + node_error)
        return _test_only(cluster, state, job, accepted, now)
    qos = accepted.qos or ""
    if node_error:
        # slurmctld made the job record before its node test failed: the job id is taken and sacct
        # shows the job FAILED 1:0 (fixtures/22.05/scenario: sbatch-3-gres9, sacct-a-*).
        _job_write(job, state, now=now, account=accepted.account, qos=qos, begin_time=now,
                   time_limit=accepted.time_limit_minutes, state=JobState.FAILED, reason="BadConstraints",
                   exit_code=1, exit_signal=0, start_time=now, end_time=now,
                   num_nodes=max(job.num_nodes, _refused_node_count(options, state, partition)))
        raise _refuse(_unsatisfied_lines(options, state, partition) + SUBMIT_FAILED + node_error)
    depends = _dependency(cluster, options)
    hold = Hold.USER if options.hold else Hold.NONE
    # over MaxTime or MaxNodes, or -N over the partition's nodes (limits.partition_limit)
    over_partition = limits.over_partition_limits(accepted.pending_reason)
    reason = ("JobHeldUser" if hold else "PartitionConfig" if over_partition else "BeginTime" if begin > now
              else dependency.pending_reason(depends) or accepted.pending_reason or "None")
    requeue = options.requeue if options.requeue is not None else bool(state.config.job_requeue)
    _job_write(job, state, now=now, account=accepted.account, qos=qos, time_limit=accepted.time_limit_minutes,
               requeue=requeue, nice=options.nice or 0, hold=hold, dependency=depends, reason=reason,
               **_array_fields(array),
               event=f"Submitted by {username} to partition {partition} (account {accepted.account}, "
                     f"QOS {qos or 'none'}).")
    request_pass(cluster)
    return job


def _may_act(job: SlurmJob, actor: AbstractBaseUser, is_admin: bool) -> bool:
    return is_admin or job.user_name == actor.get_username()


def job_cancel(*, job: SlurmJob, actor: AbstractBaseUser, is_admin: bool, now: dt.datetime | None = None,
               task_id: int | None = None) -> SlurmJob:
    """scancel: a pending job ends CANCELLED at once; a running one is signalled and ends
    CANCELLED when its script has exited. An array's job id cancels every task of it; ``task_id``
    (scancel A_T of a task still pending in the array's record) takes only that task out of it."""
    now = now or timezone.now()
    shown = f"{job.array_job_id}_{task_id}" if task_id is not None else job.job_id
    prefix = f"scancel: error: Kill job error on job id {shown}: "
    if not _may_act(job, actor, is_admin):
        raise ApiError(403, prefix + PERMISSION_DENIED)
    if task_id is not None:
        return _array_task_cancel(job, task_id, actor, now)
    members = [member for member in SlurmJob.objects.filter(cluster=job.cluster_id, array_job_id=job.job_id,
                                                            state__in=[JobState.PENDING, JobState.RUNNING])
               if member.cancellable] if job.array_job_id == job.job_id else []
    with transaction.atomic():
        for member in members:
            _cancel_one(member, actor, now, prefix)
        return _cancel_one(job, actor, now, prefix) if not members else SlurmJob.objects.get(pk=job.pk)


def _array_task_cancel(job: SlurmJob, task_id: int, actor: AbstractBaseUser, now: dt.datetime) -> SlurmJob:
    """One pending task out of its array's record; the record's last one cancels the record itself
    (slurmctld splits no record off for it: the task takes no job id)."""
    with transaction.atomic():
        job = SlurmJob.objects.select_for_update().get(pk=job.pk)
        left = [task for task in arrays.expand(job.array_pending) if task != task_id]
        if left:
            job.array_pending = arrays.compress(left)
            job.save(update_fields=["array_pending"])
            job_event(job, now, f"Task {task_id} cancelled while pending, by {actor.get_username()}.")
            return job
        job.array_pending, job.array_task_id = "", task_id
        job.save(update_fields=["array_pending", "array_task_id"])
        return _cancel_one(job, actor, now, f"scancel: error: Kill job error on job id {job.array_job_id}_{task_id}: ")


def _cancel_one(job: SlurmJob, actor: AbstractBaseUser, now: dt.datetime, prefix: str) -> SlurmJob:
    with transaction.atomic():
        job = SlurmJob.objects.select_for_update().get(pk=job.pk)
        desc = f"by {actor.get_username()}"
        if job.state == JobState.PENDING:
            job.state = JobState.CANCELLED
            job.end_time = now
            # it keeps the reason it waited for (fixtures/22.05/finished-jobs: BeginTime, JobHeldUser)
            job.state_desc = desc
            job.expected_start = None
            job.save(update_fields=["state", "end_time", "state_desc", "expected_start"])
            job_event(job, now, f"Cancelled while pending, {desc}.")
            mail_job_ended(job=job, now=now)
        elif job.state == JobState.RUNNING and job.cancellable:
            job_stop(job=job, ending_state=JobState.CANCELLED, now=now, desc=desc)
        elif job.state != JobState.RUNNING:
            raise ApiError(400, prefix + "Job/step already completing or completed", "FAILED_PRECONDITION")
        request_pass(job.cluster)
    return job


def _pending_for_update(job: SlurmJob, command: str) -> SlurmJob:
    job = SlurmJob.objects.select_for_update().select_related("cluster").get(pk=job.pk)
    if job.state != JobState.PENDING:
        raise ApiError(400, f"{command}: error: Job is no longer pending execution for job {job.job_id}",
                       "FAILED_PRECONDITION")
    return job


def job_hold(*, job: SlurmJob, actor: AbstractBaseUser, is_admin: bool, now: dt.datetime | None = None) -> SlurmJob:
    """scontrol hold: priority 0; an administrator's hold (JobHeldAdmin) only an administrator releases."""
    now = now or timezone.now()
    if not _may_act(job, actor, is_admin):
        raise ApiError(403, f"scontrol: error: {PERMISSION_DENIED} for job {job.job_id}")
    with transaction.atomic():
        job = _pending_for_update(job, "scontrol")
        job.hold = Hold.ADMIN if is_admin and job.user_name != actor.get_username() else Hold.USER
        job.priority = 0
        job.reason = "JobHeldAdmin" if job.hold == Hold.ADMIN else "JobHeldUser"
        job.accrue_time = None
        job.expected_start, job.expected_nodes = None, ""
        job.save(update_fields=["hold", "priority", "reason", "accrue_time", "expected_start", "expected_nodes"])
        job_event(job, now, f"Held by {actor.get_username()} ({job.reason}).")
    return job


def job_release(*, job: SlurmJob, actor: AbstractBaseUser, is_admin: bool, now: dt.datetime | None = None) -> SlurmJob:
    """scontrol release: the job is eligible again from now (age restarts) and gets a new priority;
    under priority/basic the next FIFO value (slurmctld's _release_job -> set_job_prio, one less
    than the lowest given yet: fixtures/22.05/prio-held, a job held at submission released after
    another job takes the value after that job's)."""
    now = now or timezone.now()
    if not _may_act(job, actor, is_admin):
        raise ApiError(403, f"scontrol: error: {PERMISSION_DENIED} for job {job.job_id}")
    with transaction.atomic():
        job = _pending_for_update(job, "scontrol")
        if job.hold == Hold.ADMIN and not is_admin:
            raise ApiError(403, f"scontrol: error: {PERMISSION_DENIED} for job {job.job_id}")
        if job.hold != Hold.NONE:
            job.hold = Hold.NONE
            job.reason = "BeginTime" if job.begin_time > now else "None"
            job.state_desc = ""
            job.accrue_time = now if job.begin_time <= now else None
            job.priority_time = job.sched_eval_time = None
            if parse_config(job.cluster.config).priority_type == "priority/basic":
                job.fifo_priority = take_fifo_priority(job.cluster, snapshot.BASIC_TOP_PRIORITY)
                job.priority, job.priority_time = priority.basic_priority(job.fifo_priority, job.nice), now
            job.save(update_fields=["hold", "reason", "state_desc", "accrue_time", "priority_time",
                                    "sched_eval_time", "fifo_priority", "priority"])
            job_event(job, now, f"Released by {actor.get_username()}.")
            request_pass(job.cluster)
    return job


def job_set_nice(*, job: SlurmJob, nice: int, actor: AbstractBaseUser, is_admin: bool,
                 now: dt.datetime | None = None) -> SlurmJob:
    """scontrol update jobid=N nice=V: only administrators may lower a job's nice below 0."""
    now = now or timezone.now()
    if not _may_act(job, actor, is_admin) or (nice < 0 and not is_admin):
        raise ApiError(403, f"scontrol: error: {PERMISSION_DENIED} for job {job.job_id}")
    with transaction.atomic():
        job = _pending_for_update(job, "scontrol")
        job.nice = nice
        job.priority_time = job.sched_eval_time = None
        job.save(update_fields=["nice", "priority_time", "sched_eval_time"])
        job_event(job, now, f"Nice set to {nice} by {actor.get_username()}.")
        request_pass(job.cluster)
    return job


def job_requeue_by_user(*, job: SlurmJob, actor: AbstractBaseUser, is_admin: bool,
                        now: dt.datetime | None = None) -> SlurmJob:
    """scontrol requeue: a running job goes back to the queue (its run recorded REQUEUED)."""
    now = now or timezone.now()
    if not _may_act(job, actor, is_admin):
        raise ApiError(403, f"scontrol: error: {PERMISSION_DENIED} for job {job.job_id}")
    with transaction.atomic():
        job = SlurmJob.objects.select_for_update().select_related("cluster").get(pk=job.pk)
        if job.state != JobState.RUNNING:
            raise ApiError(400, f"scontrol: error: Job is pending execution or already completed for job "
                                f"{job.job_id}", "FAILED_PRECONDITION")
        job_requeue(job=job, now=now, record_state=JobState.REQUEUED, desc=f"requeued by {actor.get_username()}")
        request_pass(job.cluster)
    return job
