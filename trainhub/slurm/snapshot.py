"""What the pure Slurm modules read, loaded from the database in a handful of queries.

A ClusterState holds a cluster's parsed slurm.conf, partitions (options, nodes, TRES totals),
nodes (CPUs, memory, GPUs, state), associations and QOS. From it come the inputs of
trainhub.slurm.fairshare (the association tree with its usage), trainhub.slurm.priority (the
context and one PriorityJob per job) and trainhub.slurm.scheduler.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import NamedTuple

from django.conf import settings
from django.db import connection
from django.db.models import BooleanField, ExpressionWrapper, Q, TextField
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast

from trainhub.common.compiled import CompiledQuery, rows_together
from trainhub.inventory.models import Node, NodeState
from trainhub.slurm import dependency, fairshare, features, hostlist, limits, preemption, priority, scheduler
from trainhub.slurm.conf import PartitionOptions, SlurmConfig, parse_config, parse_partition_options
from trainhub.slurm.models import Account, Association, Hold, JobState, Partition, Qos, SlurmCluster, SlurmJob, SlurmUser
from trainhub.slurm.scontrol_job import asked_tasks, requested_gpus
from trainhub.slurm.slurmconf import (PoolShape, named_features, named_real_memory_mb, named_weight, pool_shape,
                                      shape_of)
from trainhub.slurm.tres import billable_tres, memory_tres


#: priority/basic's first job priority (TOP_PRIORITY); each later job gets one less.
BASIC_TOP_PRIORITY = 0xFFFF0000


@dataclass(slots=True)
class QueuedJob:
    """A pending or running job as a scheduler pass reads it: the columns the pass uses, read with
    ``values_list`` (10,000 SlurmJob instances cost three times the query). It has SlurmJob's
    attribute names, so the functions below take either; store_breakdown fills the factor fields."""

    pk: int
    job_id: int
    user_name: str
    account: str
    partition: str
    qos: str
    num_nodes: int
    max_nodes: int
    min_nodes: int
    tasks_from_nodes: bool
    num_tasks: int
    cpus_per_task: int
    gpus_per_node: int
    time_limit: int | None
    requeue: bool
    state: str
    reason: str
    reason_prev_db: str
    priority: int
    fifo_priority: int
    priority_time: dt.datetime | None
    sched_eval_time: dt.datetime | None
    nice: int
    site_factor: int
    hold: str
    dependency: str
    restart_count: int
    submit_time: dt.datetime
    begin_time: dt.datetime
    accrue_time: dt.datetime | None
    start_time: dt.datetime | None
    preempt_time: dt.datetime | None
    preempt_kill_time: dt.datetime | None
    expected_start: dt.datetime | None
    expected_nodes: str
    array_job_id: int | None
    array_task_id: int | None
    array_pending: str
    array_max_running: int
    mem_per_node: int
    mem_per_cpu: int
    mem_per_gpu: int
    req_nodes: str
    exc_nodes: str
    exclusive: bool
    features: str | None
    nodes_from_tasks: bool
    ntasks_per_node: int
    gpus_per_task: int
    cpus_per_gpu: int
    gpus_per_job: int
    gpu_type: str
    interactive: bool
    factor_age: float = 0.0
    factor_assoc: float = 0.0
    factor_fairshare: float = 0.0
    factor_jobsize: float = 0.0
    factor_partition: float = 0.0
    factor_qos: float = 0.0
    factor_tres: dict = field(default_factory=dict)


_QUEUED_COLUMNS = tuple(f.name for f in fields(QueuedJob) if not f.name.startswith("factor_"))
#: A job as the pass functions below read it.
JobLike = SlurmJob | QueuedJob


def queued_jobs(cluster: SlurmCluster) -> list[QueuedJob]:
    """The cluster's pending and running jobs, oldest id first."""
    rows = (SlurmJob.objects.filter(cluster=cluster, state__in=["PENDING", "RUNNING"]).order_by("job_id")
            .values_list(*_QUEUED_COLUMNS))
    return [QueuedJob(*row) for row in rows]


class NodeInfo(NamedTuple):
    """A node as the scheduler and sbatch see it. A named tuple, not a frozen dataclass: sbatch makes one
    for every node of its partition, and a frozen dataclass took 2.5 us to make where this takes 1."""

    pk: int
    name: str
    cpus: int
    memory_mb: int
    gpus: int
    gpu_type: str
    #: UP with a live agent; DRAIN/DOWN nodes take no new jobs.
    available: bool
    state: str
    reason: str
    #: AvailableFeatures / ActiveFeatures (SlurmCluster.node_features); jobs' constraints match the active ones.
    available_features: tuple[str, ...] = ()
    active_features: tuple[str, ...] = ()
    #: Weight= (SlurmCluster.node_weight): the scheduler gives jobs the lowest-weight nodes first.
    weight: int = 1


@dataclass(frozen=True)
class PartitionInfo:
    name: str
    position: int
    options: PartitionOptions
    node_pks: tuple[int, ...]
    tres_totals: dict[str, int]
    #: TRESBillingWeights, parsed once.
    billing_weights: dict[str, float]


@dataclass
class ClusterState:
    cluster: SlurmCluster
    config: SlurmConfig
    partitions: dict[str, PartitionInfo]
    nodes: dict[int, NodeInfo]
    associations: list[Association]
    qos: dict[str, Qos]

    def association_for(self, *, account: str, user: str, partition: str) -> Association | None:
        """The association a job of (account, user, partition) runs under: the partition's own, else
        the one for every partition."""
        return self._by_key.get((account, user, partition)) or self._by_key.get((account, user, ""))

    def __post_init__(self) -> None:
        self._by_key = {(a.account.name, a.user, a.partition): a for a in self.associations}
        self._tres: dict[int, dict[str, int]] = {}
        self._per_node: dict[tuple[int, ...], scheduler.Resources] = {}
        #: partition -> its largest node's (CPUs, GPUs)
        self._largest: dict[str, tuple[int, int]] = {}
        self._no_reserve = {name: "noreserve" in {flag.lower() for flag in row.settings.get("flags", ())}
                            for name, row in self.qos.items()}

    def per_node_request(self, job: JobLike) -> scheduler.Resources:
        """What each node of the job must have free (one shared value per job shape: Resources is frozen):
        with --gpus one GPU, the fewest cons_tres gives each node of it (scheduler.share_gpus_per_job)."""
        nodes = asked_nodes(job)
        shape = (nodes, job.num_tasks, job.cpus_per_task, job.gpus_per_node, job.gpus_per_job,
                 job.mem_per_node, job.mem_per_cpu, job.mem_per_gpu, job.cpus_per_gpu)
        found = self._per_node.get(shape)
        if found is None:
            gpus = 1 if job.gpus_per_job else job.gpus_per_node
            cpus = scheduler.cpus_for_gpus(-(-job.num_tasks // nodes) * job.cpus_per_task, gpus,
                                           job.cpus_per_gpu)
            found = self._per_node[shape] = scheduler.Resources(
                cpus=cpus, memory_mb=job_memory_mb(job, self, cpus, gpus), gres={"gpu": gpus} if gpus else {})
        return found

    def task_nodes(self, partition: str, *, tasks: int, cpus_per_task: int, gpus_per_task: int, per_node: int) -> int:
        """The fewest of the partition's largest nodes -n's tasks fit on (scheduler.TaskSpread.min_nodes)."""
        largest = self._largest.get(partition)
        if largest is None:
            members = [self.nodes[pk] for pk in self.partitions[partition].node_pks]
            largest = self._largest[partition] = (max((node.cpus for node in members), default=1),
                                                  max((node.gpus for node in members), default=1))
        return scheduler.TaskSpread.min_nodes(tasks, cpus_per_task=cpus_per_task, gpus_per_task=gpus_per_task,
                                              largest_cpus=largest[0], largest_gpus=largest[1], per_node=per_node)

    def no_reserve(self, qos: str) -> bool:
        """Whether the QOS has Flags=NoReserve (backfill makes no reservation for its jobs)."""
        return self._no_reserve.get(qos, False)

    def tres_of(self, job: JobLike) -> dict[str, int]:
        """job_tres, computed once per job and state (a pass asks for it several times)."""
        if job.pk is None:
            return job_tres(job, self)
        if job.pk not in self._tres:
            self._tres[job.pk] = job_tres(job, self)
        return self._tres[job.pk]

    @property
    def cluster_cpus(self) -> int:
        return sum(node.cpus for node in self.nodes.values())


def _node_info(pk: int, name: str, state: str, reason: str, alive: bool, shape: PoolShape,
               cluster: SlurmCluster) -> NodeInfo:
    """The node as the scheduler sees it (its NodeName= line, slurmconf.node_spec, with its state);
    ``alive``: its agent's last heartbeat is at or after _fresh_after."""
    available_features, active_features = named_features(name, cluster)
    return NodeInfo(pk=pk, name=name, cpus=shape.cpus,
                    memory_mb=named_real_memory_mb(name, shape, cluster),
                    gpus=shape.gpus, gpu_type=shape.gpu_type, available=state == NodeState.UP and alive,
                    state=state, reason=reason, available_features=available_features,
                    active_features=active_features, weight=named_weight(name, cluster))


def _partition_info(name: str, position: int, config: dict, node_pks: tuple[int, ...],
                    nodes: dict[int, NodeInfo]) -> PartitionInfo:
    totals = {"cpu": sum(nodes[pk].cpus for pk in node_pks), "mem": sum(nodes[pk].memory_mb for pk in node_pks),
              "node": len(node_pks), "gres/gpu": sum(nodes[pk].gpus for pk in node_pks)}
    options = parse_partition_options(config)
    return PartitionInfo(name, position, options, node_pks, totals, options.billing_weights)


def _fresh_after(now: dt.datetime) -> dt.datetime:
    return now - dt.timedelta(seconds=settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS)


def load_cluster(cluster: SlurmCluster, *, now: dt.datetime) -> ClusterState:
    """The whole cluster, as a scheduler pass and the reports need it."""
    rows = list(cluster.partitions.prefetch_related("node_pools").order_by("position", "name"))
    pool_ids = {pool.pk for p in rows for pool in p.node_pools.all()}
    fresh_after = _fresh_after(now)
    pool_of: dict[int, int] = {}
    nodes: dict[int, NodeInfo] = {}
    for node in (Node.objects.filter(pool_id__in=pool_ids, dedicated_to=cluster.owner_key)
                 .select_related("pool").defer("facts").order_by("name")):
        pool_of[node.pk] = node.pool_id
        alive = node.last_heartbeat is not None and node.last_heartbeat >= fresh_after
        nodes[node.pk] = _node_info(node.pk, node.name, node.state, node.state_reason, alive, shape_of(node.pool),
                                    cluster)
    partitions = {}
    for row in rows:
        members = {pool.pk for pool in row.node_pools.all()}
        partitions[row.name] = _partition_info(row.name, row.position, row.config,
                                               tuple(pk for pk in nodes if pool_of[pk] in members), nodes)
    associations = list(Association.objects.filter(cluster=cluster).select_related("account"))
    qos = {row.name: row for row in Qos.objects.filter(cluster=cluster)}
    return ClusterState(cluster, parse_config(cluster.config), partitions, nodes, associations, qos)


def _chain_sql() -> str:
    """The ids of a user's associations and of every ancestor of theirs (limits are inherited up
    the tree; slurmctld walks the same parent pointers). UNION, not UNION ALL: a cycle ends."""
    table, quote = Association._meta.db_table, connection.ops.quote_name
    return (f"WITH RECURSIVE chain(id, parent_id) AS ("
            f"SELECT id, parent_id FROM {table} WHERE cluster_id = %s AND {quote('user')} = %s "
            f"UNION SELECT a.id, a.parent_id FROM {table} a JOIN chain ON a.id = chain.parent_id"
            f") SELECT id FROM chain")


# sbatch's reads, compiled once per process (trainhub.common.compiled): building each queryset anew
# cost more CPU than the rest of a submission's checks together.
#: The partition with one row per node of its pools (a LEFT JOIN: one row of NULL nodes for a
#: partition without any); nodes dedicated to another owner are skipped by the caller. The
#: partition's config comes as its JSON text, decoded once, not once per node row; whether a node's
#: heartbeat is fresh (at or after the third argument, _fresh_after) as a boolean, not its time
#: (reading a timestamp cost 4 us, a tenth of a node's row).
_PARTITION_NODES = CompiledQuery(
    lambda cluster_id, name, fresh_after: Partition.objects.filter(cluster_id=cluster_id, name=name)
    .annotate(config_text=Cast("config", output_field=TextField()),
              node_alive=ExpressionWrapper(Q(node_pools__nodes__last_heartbeat__gte=fresh_after),
                                           output_field=BooleanField()))
    .order_by("node_pools__nodes__name")
    .values_list("pk", "position", "config_text", "node_pools__nodes__dedicated_to", "node_pools__nodes__pk",
                 "node_pools__nodes__name", "node_pools__nodes__state", "node_pools__nodes__state_reason",
                 "node_alive", "node_pools__machine_type", "node_pools__accelerator_type",
                 "node_pools__accelerator_count"),
    918273645, "sample-partition", dt.datetime(1999, 9, 9, 9, 9, 9, tzinfo=dt.UTC))
_USER_ASSOCIATIONS = CompiledQuery(
    lambda cluster_id, user: Association.objects.filter(cluster_id=cluster_id,
                                                        pk__in=RawSQL(_chain_sql(), (cluster_id, user)))
    .values_list("pk", "account__name", "user", "partition", "parent_id", "shares", "settings", "raw_usage",
                  "decay_usage", "fs_factor"),
    918273645, "sample-user")
_QOS = CompiledQuery(lambda cluster_id: Qos.objects.filter(cluster_id=cluster_id).values_list("pk", "name", "settings"),
                     918273645)
_DEFAULT_ACCOUNT = CompiledQuery(lambda cluster_id, name: SlurmUser.objects.filter(cluster_id=cluster_id, name=name)
                                 .values_list("default_account"), 918273645, "sample-user")
_CLUSTER_POOLS = CompiledQuery(lambda owner: Node.objects.filter(dedicated_to=owner).order_by()
                               .values_list("pool__name", "pool__executor").distinct(), "\x00owner")
#: The attribute of a SlurmCluster object that holds its pools once read (cluster_pools). A cluster
#: object lives for one request, as the user object that holds its memberships (iam.selectors).
_POOLS_READ = "_trainhub_pools_read"


def cluster_pools(cluster: SlurmCluster) -> dict[str, str]:
    """The pools of the cluster's nodes by name, with their executor (simulated, or an agent's):
    read once per cluster object, or with load_for_submission's reads."""
    pools = getattr(cluster, _POOLS_READ, None)
    if pools is None:
        pools = dict(_CLUSTER_POOLS.rows(cluster.owner_key))
        setattr(cluster, _POOLS_READ, pools)
    return pools


def load_for_submission(cluster: SlurmCluster, *, partition: str, user: str, now: dt.datetime,
                        default_account: bool = False) -> tuple[ClusterState, str | None]:
    """What sbatch checks a job against, and nothing else of the cluster: the named partition and
    its nodes (none if there is no such partition), the user's associations with their ancestors,
    and the QOS; with ``default_account``, the user's DefaultAccount (None if they have none). The
    cluster's pools come along for its simulated notice (cluster_pools). One round trip of compiled
    queries however many jobs, users and associations the cluster has.

    Enough for limits.validate_submission except submit-count limits (GrpSubmitJobs,
    MaxSubmitJobs), which count other users' jobs under shared ancestors: see has_submit_count_limits.
    """
    fresh_after = _fresh_after(now)
    partitions: dict[str, PartitionInfo] = {}
    nodes: dict[int, NodeInfo] = {}
    partition_rows, association_rows, qos_rows, pool_rows, *account_rows = rows_together(
        (_PARTITION_NODES, (cluster.pk, partition, fresh_after)), (_USER_ASSOCIATIONS, (cluster.pk, user)), (_QOS, (cluster.pk,)),
        (_CLUSTER_POOLS, (cluster.owner_key,)), *([(_DEFAULT_ACCOUNT, (cluster.pk, user))] if default_account else []))
    setattr(cluster, _POOLS_READ, dict(pool_rows))
    # The nodes' rows as they come, not Node and NodePool model instances (building a model instance
    # costs more than reading its row: 16 nodes were a tenth of an sbatch's CPU).
    found, owner_key = None, cluster.owner_key
    for _, position, config, owner, pk, name, state, reason, alive, machine_type, accelerator, count in partition_rows:
        found = position, config
        if pk is not None and owner == owner_key:
            # a node without a heartbeat compares NULL: not alive
            nodes[pk] = _node_info(pk, name, state, reason, bool(alive), pool_shape(machine_type, accelerator, count),
                                   cluster)
    if found is not None:
        position, config = found
        partitions[partition] = _partition_info(partition, position, json.loads(config), tuple(nodes), nodes)
    associations = [Association(pk=pk, cluster=cluster, account=Account(name=account), user=user_name,
                                partition=part, parent_id=parent, shares=shares, settings=values, raw_usage=usage,
                                decay_usage=decay, fs_factor=fs_factor)
                    for pk, account, user_name, part, parent, shares, values, usage, decay, fs_factor
                    in association_rows]
    qos = {name: Qos(pk=pk, cluster=cluster, name=name, settings=values) for pk, name, values in qos_rows}
    state = ClusterState(cluster, parse_config(cluster.config), partitions, nodes, associations, qos)
    return state, next(iter(account_rows[0]), (None,))[0] if account_rows else None


def fairshare_tree(state: ClusterState) -> list[fairshare.Association]:
    return [fairshare.Association(key=str(a.pk), account=a.account.name, user=a.user or None,
                                  parent=str(a.parent_id) if a.parent_id else None, shares=a.shares,
                                  usage=a.decay_usage, raw_usage=a.raw_usage, partition=a.partition or None)
            for a in state.associations]


def compute_fairshare(state: ClusterState) -> fairshare.FairShareResult:
    return fairshare.compute_fairshare(fairshare_tree(state), fair_tree=state.config.fair_tree,
                                       dampening_factor=state.config.fair_share_dampening_factor)


def priority_norms(state: ClusterState) -> dict[str, int]:
    """What the priority factors are normalised against, cluster-wide: the cluster's nodes and CPUs
    (job size), the highest PriorityJobFactor (partition) and association Priority (assoc). A
    whole-cluster ``state`` (load_cluster) gives the true values; the decay run stores them on the
    cluster (SlurmCluster.priority_norms) for submissions, whose state holds one partition and one
    user's associations."""
    return {"nodes": len(state.nodes), "cpus": state.cluster_cpus,
            "max_partition_factor": max((info.options.priority_job_factor for info in state.partitions.values()),
                                        default=0),
            "max_assoc_priority": max((int(a.settings.get("priority", 0)) for a in state.associations), default=0)}


def priority_context(state: ClusterState, norms: Mapping[str, int] | None = None) -> priority.PriorityContext:
    """The cluster-wide inputs of the priority formula from ``state``, normalised against ``norms``
    (priority_norms; by default ``state``'s own)."""
    norms = norms or priority_norms(state)
    partitions = {name: priority.PartitionFacts(priority_job_factor=info.options.priority_job_factor,
                                                tres_totals=info.tres_totals,
                                                max_time_minutes=info.options.max_time_minutes)
                  for name, info in state.partitions.items()}
    return priority.PriorityContext.build(
        config=state.config, cluster_nodes=norms["nodes"], cluster_cpus=norms["cpus"], partitions=partitions,
        qos_priorities={name: int(row.settings.get("priority", 0)) for name, row in state.qos.items()},
        max_assoc_priority=norms["max_assoc_priority"], max_partition_factor=norms["max_partition_factor"])


def asked_nodes(job: JobLike) -> int:
    """The nodes a job counts for its size, limits and per-node share: a pending node range's MIN (its
    num_nodes is the count the scheduler tried it with, slurmctld's node_cnt_wag, which neither its
    priority nor its limits see), else num_nodes (a running job's are those it got)."""
    return job.min_nodes if job.min_nodes and job.state == JobState.PENDING else job.num_nodes


def job_cpus(job: JobLike) -> int:
    """Its tasks' CPUs; a pending node range without -n asks one task's (scontrol_job.job_cpus_and_tres)."""
    return asked_tasks(num_tasks=job.num_tasks, tasks_from_nodes=job.tasks_from_nodes,
                       pending=job.state == JobState.PENDING) * job.cpus_per_task


def job_gpus(job: JobLike) -> int:
    """The GPUs the job asks for (scontrol_job.requested_gpus): -N 2 --gpus=3 asks 3, not 2 on each node."""
    return requested_gpus(nodes=asked_nodes(job), num_tasks=job.num_tasks, gpus_per_job=job.gpus_per_job,
                          gpus_per_task=job.gpus_per_task, gpus_per_node=job.gpus_per_node)


def job_billing(job: JobLike, state: ClusterState, tres: Mapping[str, int] | None = None) -> float:
    """Billable TRES per second of what the job asks, or of ``tres`` (allocation_tres: slurmctld bills an
    allocation's tres_alloc_cnt; fixtures/22.05/cpus-per-gpu/sacct.txt, --gpus=2 --cpus-per-gpu=3 bills 6):
    the partition's TRESBillingWeights applied, else the CPU count."""
    tres = tres or {"cpu": job_cpus(job), "node": asked_nodes(job), "gres/gpu": job_gpus(job)}
    partition = state.partitions.get(job.partition)
    return billable_tres(tres, partition.billing_weights if partition else {},
                         max_tres="MAX_TRES" in state.config.priority_flags)


def allocation_tres(allocation: Mapping[str, scheduler.Resources]) -> dict[str, int]:
    """The CPUs, nodes and GPUs of an allocation: what slurmctld bills once a job has nodes (its
    tres_alloc_cnt; fixtures/22.05/gpus-spread/sacct.txt: ``--gpus=12`` asked one CPU and runs on 2 nodes,
    AllocTRES billing=2,cpu=2)."""
    return {"cpu": sum(resources.cpus for resources in allocation.values()), "node": len(allocation),
            "gres/gpu": sum(resources.gres.get("gpu", 0) for resources in allocation.values())}


def job_tres(job: JobLike, state: ClusterState) -> dict[str, int]:
    """The TRES a job asks for, ``billing`` included (as Slurm's TRES counts, an integer), and its memory
    where memory is a consumable resource and the job asked for some (job_memory_tres)."""
    tres = {"cpu": job_cpus(job), "node": asked_nodes(job)}
    gpus = job_gpus(job)
    if gpus:
        tres["gres/gpu"] = gpus
    memory = job_memory_tres(job, state, gpus)
    if memory:
        tres["mem"] = memory
    tres["billing"] = int(job_billing(job, state))
    return tres


def job_memory_tres(job: JobLike, state: ClusterState, gpus: int) -> int:
    """The memory (MB) a job's TRES counts against limits such as ``GrpTRES=mem=`` (tres.memory_tres of
    its request, ``gpus`` its GPUs), only where memory is a consumable resource (CR_*_Memory): under
    CR_CPU 22.05 holds no such limit against a job (fixtures/22.05/job-records mem-N3-4: ``-N 3-4
    --mem=8000`` asks 24000M of 20000 and runs), under CR_CPU_Memory it does (job-records-mem mem-N3-4
    waits AssocGrpMemLimit). 0 for a job without --mem*: trainhub gives it no memory (job_memory_mb),
    where 22.05 would count its nodes' whole RealMemory."""
    if not state.config.memory_is_consumable:
        return 0
    return memory_tres(mem_per_gpu=job.mem_per_gpu, mem_per_cpu=job.mem_per_cpu, mem_per_node=job.mem_per_node,
                       gpus=gpus, cpus=job_cpus(job), nodes=asked_nodes(job))


AssociationTerms = dict[tuple[str, str, str], tuple[float, int]]


def association_terms(state: ClusterState, shares: fairshare.FairShareResult | None = None) -> AssociationTerms:
    """(account, user, partition) -> (fair-share factor, association Priority): each association's
    terms worked out once per pass, not once per job (``partition`` "" = the association for every
    partition, see ClusterState.association_for). The factor from ``shares``, else the one the last
    decay run stored (Association.fs_factor)."""
    return {(a.account.name, a.user, a.partition): (shares.factor(str(a.pk)) if shares is not None else a.fs_factor,
                                                    int(a.settings.get("priority", 0)))
            for a in state.associations}


def priority_job(job: JobLike, state: ClusterState, terms: AssociationTerms) -> priority.PriorityJob:
    """The job as trainhub.slurm.priority sees it; ``terms`` from association_terms (a job without an
    association gets no fair-share and no association priority). A job not yet written has no job
    id, and so no priority/basic value (its submission gives that one as it takes its id, see
    services.jobs._submission_priority; its release another, services.jobs.job_release)."""
    fairshare_factor, assoc_priority = (terms.get((job.account, job.user_name, job.partition))
                                        or terms.get((job.account, job.user_name, "")) or (0.0, 0))
    return priority.PriorityJob(
        job_id=job.job_id, partition=job.partition, submit_time=job.submit_time, eligible_time=job.accrue_time,
        user=job.user_name, account=job.account, qos=job.qos or None, min_nodes=asked_nodes(job), cpus=job_cpus(job),
        time_limit_minutes=job.time_limit, tres=state.tres_of(job), fairshare_factor=fairshare_factor,
        assoc_priority=assoc_priority, nice=job.nice, site_factor=job.site_factor, held=job.hold != Hold.NONE,
        previous_priority=job.priority or None, basic_priority=job.fifo_priority)


#: SlurmJob's factor columns, in priority.FACTOR_NAMES order.
FACTOR_FIELDS = tuple(f"factor_{name}" for name in priority.FACTOR_NAMES)
#: What a stored breakdown is read back from (see breakdown_from_row); ``factor_tres`` only when
#: PriorityWeightTRES is set (decoding 10,000 JSON documents costs more than the rest of a row).
BREAKDOWN_FIELDS = ("job_id", "partition", "user_name", "account", "qos", "priority", "site_factor", "nice",
                    *FACTOR_FIELDS)


def breakdown_fields(config: SlurmConfig) -> tuple[str, ...]:
    return (*BREAKDOWN_FIELDS, "factor_tres") if config.priority_weight_tres else BREAKDOWN_FIELDS


def set_priorities(jobs: Iterable[JobLike], state: ClusterState, terms: AssociationTerms,
                   context: priority.PriorityContext, now: dt.datetime) -> None:
    """Each job's priority as of ``now`` with its factors (store_breakdown), from ``terms``
    (association_terms) and ``context`` (priority_context)."""
    for job in jobs:
        store_breakdown(job, priority.compute_priority(priority_job(job, state, terms), context, now), now)


def store_breakdown(job: JobLike, breakdown: priority.PriorityBreakdown, now: dt.datetime) -> None:
    job.priority = breakdown.priority
    job.priority_time = now
    for factor_field, value in zip(FACTOR_FIELDS, breakdown.values, strict=True):
        setattr(job, factor_field, value)
    job.factor_tres = {name: [f.factor, f.weight] for name, f in breakdown.tres.items()}


def priority_weights(config: SlurmConfig) -> tuple[float, ...]:
    """The six PriorityWeight* values in FACTOR_NAMES order."""
    return priority.PriorityContext.build(config=config, cluster_nodes=0, cluster_cpus=0, partitions={}).weights


def breakdown_from_row(row: tuple, weights: tuple[float, ...]) -> priority.PriorityBreakdown:
    """A job's stored factors (a ``breakdown_fields`` values row) as the PriorityBreakdown sprio prints."""
    tres = {name: priority.Factor(factor, weight, factor * weight) for name, (factor, weight) in row[14].items()
            } if len(row) > 14 else {}
    return priority.PriorityBreakdown(row[0], row[1], row[2], row[3], row[4] or None, row[5], row[8:14], weights,
                                      tres, row[6], row[7])


_ASSOC_LIMITS = {f.name for f in fields(limits.AssocRecord)} - {"key", "account", "user", "partition", "parent",
                                                                 "qos", "used_tres_minutes"}
_QOS_SETTINGS = {f.name for f in fields(limits.QosRecord)} - {"name", "flags", "preempt", "used_tres_minutes"}


def assoc_record(assoc: Association, used_tres_minutes: Mapping[str, int] | None = None) -> limits.AssocRecord:
    """Association.settings holds AssocRecord's limit fields by name (plus ``priority``)."""
    values = {name: value for name, value in assoc.settings.items() if name in _ASSOC_LIMITS}
    return limits.AssocRecord(key=str(assoc.pk), account=assoc.account.name, user=assoc.user or None,
                              partition=assoc.partition or None,
                              parent=str(assoc.parent_id) if assoc.parent_id else None,
                              qos=frozenset(assoc.settings.get("qos", ())), **values,
                              used_tres_minutes=used_tres_minutes or {})


def subtree_tres_minutes(associations: Iterable[Association]) -> dict[int, dict[str, int]]:
    """Each association's subtree usage per TRES in whole minutes (usage_tres_raw / 60, truncated as
    acct_policy does), for the associations that have a GrpTRESMins (only they are held to it)."""
    rows = list(associations)
    limited = {a.pk for a in rows if a.settings.get("grp_tres_mins")}
    if not limited:
        return {}
    parent_of = {a.pk: a.parent_id for a in rows}
    seconds: dict[int, dict[str, float]] = {pk: {} for pk in limited}
    for assoc in rows:
        ancestor, seen = assoc.pk, set()
        while ancestor is not None and ancestor not in seen:
            seen.add(ancestor)
            if ancestor in limited:
                for name, used in assoc.tres_usage.items():
                    seconds[ancestor][name] = seconds[ancestor].get(name, 0.0) + used
            ancestor = parent_of.get(ancestor)
    return {pk: {name: int(used / 60) for name, used in usage.items()} for pk, usage in seconds.items()}


def qos_record(qos: Qos) -> limits.QosRecord:
    """Qos.settings holds QosRecord's fields by name (flags and preempt as lists); its usage in whole
    TRES-minutes (acct_policy: ``usage_tres_raw / 60``, truncated) where a GrpTRESMins holds it."""
    values = {name: value for name, value in qos.settings.items() if name in _QOS_SETTINGS}
    used = {name: int(seconds / 60) for name, seconds in qos.tres_usage.items()} if values.get("grp_tres_mins") else {}
    return limits.QosRecord(name=qos.name, flags=frozenset(qos.settings.get("flags", ())),
                            preempt=frozenset(qos.settings.get("preempt", ())), used_tres_minutes=used, **values)


def limit_context(state: ClusterState) -> limits.LimitContext:
    used = subtree_tres_minutes(state.associations)
    return limits.LimitContext(
        config=state.config,
        associations={str(a.pk): assoc_record(a, used.get(a.pk)) for a in state.associations},
        qos={name: qos_record(row) for name, row in state.qos.items()},
        partitions={name: info.options for name, info in state.partitions.items()})


def limit_request(job: JobLike, state: ClusterState) -> limits.JobRequest:
    assoc = state.association_for(account=job.account, user=job.user_name, partition=job.partition)
    return limits.JobRequest(user=job.user_name, account=job.account, partition=job.partition, qos=job.qos or None,
                             assoc_key=str(assoc.pk) if assoc else None, nodes=asked_nodes(job),
                             tres=state.tres_of(job), time_limit_minutes=job.time_limit)


def limit_usage(state: ClusterState, context: limits.LimitContext, jobs: list[JobLike],
                requests: dict[int, limits.JobRequest] | None = None) -> limits.LimitUsage:
    """Pending and running jobs counted against the limits (``requests``: their JobRequests by pk)."""
    requests = requests if requests is not None else {job.pk: limit_request(job, state) for job in jobs}
    return limits.LimitUsage.of(context, [(requests[job.pk], job.state == "RUNNING") for job in jobs])


def has_submit_count_limits(context: limits.LimitContext) -> bool:
    """Whether a submission must count the queue (only submit-count limits need it)."""
    return (any(a.grp_submit_jobs is not None or a.max_submit_jobs is not None for a in context.associations.values())
            or any(q.grp_submit_jobs is not None or q.max_submit_jobs_per_user is not None
                   or q.max_submit_jobs_per_account is not None for q in context.qos.values()))


# --- the scheduler's snapshot -------------------------------------------------------------------

def job_memory_mb(job: JobLike, state: ClusterState, cpus: int, gpus: int | None = None) -> int:
    """Memory per node: the job's --mem, or --mem-per-cpu x CPUs, or --mem-per-gpu x GPUs (``gpus``: the
    node's, else the job's per node; where memory
    is a consumable resource, SelectTypeParameters=CR_*_Memory); else DefMemPerNode, else DefMemPerGPU x GPUs, else DefMemPerCPU x CPUs. Without
    any of them a job takes no memory, so jobs share nodes by GPUs and CPUs (Slurm would give it
    the node's whole RealMemory, making every job exclusive)."""
    config = state.config
    if config.memory_is_consumable and (job.mem_per_node or job.mem_per_cpu or job.mem_per_gpu):
        # the job's own --mem / --mem-per-cpu / --mem-per-gpu (with --gpus, of the GPUs it has there)
        return job.mem_per_node or job.mem_per_cpu * cpus or job.mem_per_gpu * (
            gpus if gpus is not None else job.gpus_per_node)
    if config.def_mem_per_node:
        return config.def_mem_per_node
    if config.def_mem_per_gpu and job.gpus_per_node:
        return config.def_mem_per_gpu * job.gpus_per_node
    return (config.def_mem_per_cpu or 0) * cpus


def scheduler_nodes(state: ClusterState) -> list[scheduler.NodeState]:
    return [scheduler.NodeState(name=node.name, cpus=node.cpus, memory_mb=node.memory_mb,
                                gres={"gpu": node.gpus} if node.gpus else {}, usable=node.available,
                                features=frozenset(node.active_features), gpu_type=node.gpu_type,
                                weight=node.weight)
            for node in state.nodes.values()]


_HOLD_REASONS = {Hold.USER: "JobHeldUser", Hold.ADMIN: "JobHeldAdmin"}


def allocated_memory_mb(job: JobLike, state: ClusterState, cpus: int, gpus: int) -> int:
    """The memory a running job holds on a node where it has ``cpus`` and ``gpus`` (job_memory_mb):
    with --gpus, --mem-per-gpu's for the GPUs it got there (fixtures/22.05/gpus-mem scontrol-d-N2-g3)."""
    return job_memory_mb(job, state, cpus, gpus if job.gpus_per_job else None)


def scheduled_node_count(job: JobLike, state: ClusterState) -> int:
    """The nodes the scheduler asks for a job: its own count, which for -n without -N is slurmctld's
    estimate at submission from the tasks' CPUs alone (fixtures/22.05/gputype/scontrol-6: held ``-n 40
    --gpus-per-task=1`` shows 3 nodes of 16 CPUs), raised by --gpus-per-task's GPUs, as the select
    plugin counts them once it tries the job (ntasks/scontrol-4: ``-n 16 --gpus-per-task=1`` on nodes of 8
    GPUs pends showing 2; services.passes stores it then). A node range's: with --gpus its MIN (the
    scheduler adds nodes to MAX as its GPUs need them), else node_range_count."""
    if job.min_nodes:
        return job.min_nodes if job.gpus_per_job else node_range_count(
            state, job.partition, low=job.min_nodes, high=job.max_nodes, excluded=job.exc_nodes)
    if not (job.nodes_from_tasks and job.gpus_per_task) or job.partition not in state.partitions:
        return job.num_nodes
    return max(job.num_nodes, state.task_nodes(job.partition, tasks=job.num_tasks, cpus_per_task=job.cpus_per_task,
                                               gpus_per_task=job.gpus_per_task, per_node=job.ntasks_per_node))


def node_range_count(state: ClusterState, partition: str, *, low: int, high: int, excluded: str) -> int:
    """-N LOW-HIGH without --gpus asks for HIGH (job_test.c ``_eval_nodes``: ``rem_nodes = MAX(min_nodes,
    req_nodes)``; fixtures/22.05/gpus-spread: ``-N 1-3 -n 5`` runs on 3 idle nodes, 3,1,1 tasks), at most the
    partition's nodes that can run it: one of its -x (``excluded``), a DRAIN, DOWN or silent node is none the
    select plugin is given, and counting it would keep the job waiting for it. Where fewer are free the
    scheduler takes as many as are, LOW at least (scheduler.PendingJob.min_nodes); a job shows this count
    from the node test at its submission on (fixtures/22.05/node-range: wait-N3-4 NumNodes=4-4, squeue's
    NODES 4; begin-N2-4-x1 3-4; slurmctld's node_cnt_wag), a held job its range (held-N2-4: 2-4). A HIGH
    above the partition's MaxNodes keeps the job waiting with PartitionNodeLimit, as a LOW above it
    (job_mgr.c _part_access_check tests the job's max_nodes; fixtures/22.05/range-limits pm-N1-4)."""
    info = state.partitions.get(partition)
    if info is None:
        return high
    others = set(hostlist.expand(excluded)) if excluded else set()
    usable = sum(1 for pk in info.node_pks if state.nodes[pk].available and state.nodes[pk].name not in others)
    return max(min(high, usable), low)


def pending_job(job: JobLike, state: ClusterState, request: limits.JobRequest, *,
                allocating: bool = False) -> scheduler.PendingJob:
    """The job as the scheduler places it: a constraint's counts raise its node count (``a100*2``), and
    so do -n's tasks' GPUs (scheduled_node_count); ``allocating``: a salloc the scheduler has not seen
    yet (scheduler.PendingJob.allocating)."""
    constraint = features.parse_constraint(job.features) if job.features else None
    nodes = scheduled_node_count(job, state)
    return scheduler.PendingJob(
        job_id=job.job_id, partition=job.partition, priority=job.priority, submit_time=job.submit_time,
        nodes=constraint.node_count(nodes) if constraint else nodes,
        per_node=state.per_node_request(job), time_limit_minutes=job.time_limit,
        user=job.user_name, account=job.account, qos=job.qos or None, begin_time=job.begin_time,
        hold_reason=_HOLD_REASONS.get(job.hold), blocked_reason=dependency.pending_reason(job.dependency),
        no_reserve=state.no_reserve(job.qos),
        requeue=job.requeue, restart_count=job.restart_count, limit_request=request,
        required_nodes=frozenset(hostlist.expand(job.req_nodes) if job.req_nodes else ()),
        excluded_nodes=frozenset(hostlist.expand(job.exc_nodes) if job.exc_nodes else ()), exclusive=job.exclusive,
        constraint=constraint, gpu_type=job.gpu_type or None, gpus_per_job=job.gpus_per_job,
        gpus_per_task=job.gpus_per_task, max_nodes=gpu_node_range(job, state),
        min_nodes=job.min_nodes if job.min_nodes and not job.gpus_per_job else 0,
        mem_per_gpu=job.mem_per_gpu if state.config.memory_is_consumable else 0, cpus_per_gpu=job.cpus_per_gpu,
        mem_per_cpu=job.mem_per_cpu if state.config.memory_is_consumable else 0,
        spread=task_spread(job, nodes, state), allocating=allocating)


def gpu_node_range(job: JobLike, state: ClusterState) -> int:
    """The most nodes a --gpus job may take (scheduler.PendingJob.max_nodes): -N MIN-MAX's MAX, without -N
    (``max_nodes`` 0: sbatch sets it with -N) the partition's nodes, at most its MaxNodes (node_scheduler.c
    select_nodes: ``max_nodes = MIN(job's max_nodes, part_ptr->max_nodes)``; fixtures/22.05/range-limits
    pm-gpus6: ``--gpus=6`` needing 3 nodes waits with Resources under MaxNodes=2, not PartitionNodeLimit:
    without -N the job has no max_nodes for _part_access_check); 0 for an exact -N and other jobs."""
    if not job.gpus_per_job:
        return 0
    if job.max_nodes:
        return job.max_nodes if job.min_nodes else 0
    partition = state.partitions.get(job.partition)
    if partition is None:
        return 0
    most = partition.options.max_nodes
    return len(partition.node_pks) if most is None else min(len(partition.node_pks), most)


def task_spread(job: JobLike, nodes: int, state: ClusterState) -> scheduler.TaskSpread | None:
    """How the job's tasks fill its ``nodes`` (scheduled_node_count), for -n without -N, for more tasks
    than nodes without --ntasks-per-node and for the tasks of a --gpus job of a node range: in node order
    each node takes as many tasks as it holds, leaving one for each node after it (cons_tres
    ``_cpus_to_use``; fixtures/22.05/nsplit: ``-N 2 -n 4`` runs 3,1, ``-N 3 -n 7`` 5,1,1, with 2 CPUs free
    on the first node 2,2; gpus-spread: ``-N 2 -n 4 --gpus=3`` 3,1, ``--gpus=12 -n 3`` 2,1 on the 2 nodes
    its GPUs need). None for the other jobs, one task per node or one node's worth of tasks on the node a
    -N job is given."""
    if job.nodes_from_tasks:
        return scheduler.TaskSpread(job.num_tasks, job.cpus_per_task, job.gpus_per_task, job.ntasks_per_node)
    if job.num_tasks > nodes and not job.ntasks_per_node and gpu_node_range(job, state):
        return scheduler.TaskSpread(job.num_tasks, job.cpus_per_task, job.gpus_per_task)
    if nodes > 1 and job.num_tasks > min(nodes, job.min_nodes or job.num_nodes) and not job.ntasks_per_node:
        # more tasks than nodes, or a node range (-N 1-2 -n 2: scheduled_node_count's 2 nodes, one task each)
        return scheduler.TaskSpread(job.num_tasks, job.cpus_per_task, job.gpus_per_task, exact_nodes=True)
    return None


def running_job(job: JobLike, nodes: list[tuple[str, int, int]], state: ClusterState,
                request: limits.JobRequest) -> scheduler.RunningJob:
    """``nodes``: (node name, CPUs, GPUs) of the job's current allocation."""
    allocation = {name: scheduler.Resources(cpus=cpus, memory_mb=allocated_memory_mb(job, state, cpus, gpus),
                                            gres={"gpu": gpus} if gpus else {})
                  for name, cpus, gpus in nodes}
    end = preemption.victim_end(
        job.start_time + dt.timedelta(minutes=job.time_limit) if job.time_limit is not None else None,
        job.preempt_kill_time)
    return scheduler.RunningJob(job_id=job.job_id, partition=job.partition, allocation=allocation,
                                start_time=job.start_time, end_time=end, user=job.user_name, account=job.account,
                                qos=job.qos or None, priority=job.priority, requeue=job.requeue,
                                restart_count=job.restart_count, limit_request=request,
                                preempt_time=job.preempt_time)


def preempt_policy(state: ClusterState, context: limits.LimitContext) -> preemption.PreemptPolicy:
    return preemption.PreemptPolicy(config=state.config,
                                    partitions={name: info.options for name, info in state.partitions.items()},
                                    qos=context.qos)
