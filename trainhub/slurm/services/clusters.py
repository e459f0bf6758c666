"""Creating and deleting clusters, and the admin edits of a running one (slurm.conf keys,
prolog/epilog scripts, partition options, draining and resuming nodes), each with an audit entry."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from trainhub.common.compiled import Counter
from trainhub.common.errors import ApiError, FieldViolation, invalid_argument
from trainhub.iam.models import Project
from trainhub.inventory.models import Node, NodePool, NodeState
from trainhub.inventory.services import NodesUnavailable, node_set_state, nodes_dedicate, nodes_release
from trainhub.scheduling import pass_requests
from trainhub.slurm import features
from trainhub.slurm.clusterspec import (
    CLUSTER_ID,
    SPEC,
    ClusterSpec,
    ClusterSpecError,
    parse_cluster_spec,
    validate_scripts,
)
from trainhub.slurm.conf import (
    DEFAULT_NODE_WEIGHT,
    NODE_WEIGHT_MAX,
    ConfigError,
    parse_config,
    parse_partition_options,
)
from trainhub.slurm.models import (
    Account,
    Association,
    ClusterAuditEntry,
    Partition,
    Qos,
    SlurmCluster,
    SlurmUser,
)
from trainhub.slurm.slurmconf import machine_memory_mb

#: sacctmgr's stock QOS, present on every new cluster (the default QOS of new associations).
DEFAULT_QOS = "normal"
ROOT = "root"


def pass_requested_flag(cluster_pk: int) -> str:
    """The Redis flag that says a pass of the cluster is asked for and not yet started."""
    return f"trainhub:slurm:{cluster_pk}:pass-requested"


def request_pass(cluster: SlurmCluster) -> None:
    """Ask for a scheduler pass of the cluster once the current transaction commits. Requests made
    before the pass starts share it (scheduling.pass_requests), as slurmctld's scheduler runs once
    for the jobs submitted since its last run: a burst of sbatch queues one pass, not one each."""
    pass_requests.request_coalesced(pass_requested_flag(cluster.pk), "trainhub.slurm.tasks.cluster_pass", cluster.pk)


#: A cluster's job ids: slurmctld numbers jobs from one counter per cluster; and the priority/basic
#: FIFO values it has given (SlurmCluster.fifo_priorities), taken in the same UPDATE.
JOB_IDS = Counter(SlurmCluster, "next_job_id", countdown="fifo_priorities")


def take_job_ids(cluster: SlurmCluster, count: int) -> int:
    """The first of ``count`` consecutive job ids, taken from the cluster's counter in one UPDATE."""
    return JOB_IDS.take(cluster.pk, count)[0]


def take_fifo_priority(cluster: SlurmCluster, top: int) -> int:
    """priority/basic's next FIFO value, ``top`` less the values given so far (a released job's:
    slurmctld's set_job_prio gives it one less than the lowest yet), in one UPDATE."""
    return top - JOB_IDS.take(cluster.pk, 0, down=1)[1]


def audit(cluster: SlurmCluster, *, actor: str, subject: str, old: Any, new: Any, now: dt.datetime) -> None:
    """Record a change; the subject (``association user/account/partition``, up to ~230 characters
    from valid names) and the actor are cut to what their columns hold."""
    ClusterAuditEntry.objects.create(cluster=cluster, time=now, actor=clipped(actor, ClusterAuditEntry, "actor"),
                                     subject=clipped(subject, ClusterAuditEntry, "subject"), old_value=old,
                                     new_value=new)


def clipped(text: str, model: type, field: str) -> str:
    """``text`` cut to the max_length of ``model.field``, ending in "..." when cut."""
    limit = model._meta.get_field(field).max_length
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _pool_violations(spec: ClusterSpec, location: str) -> tuple[dict[str, NodePool], list[FieldViolation]]:
    """Every named pool must exist in the cluster's location, be free of other owners, and serve
    one role (a login pool runs no jobs)."""
    named = {name for partition in spec.partitions for name in partition.pool_names}
    if spec.login_pool:
        named.add(spec.login_pool)
    pools = {pool.name: pool for pool in NodePool.objects.filter(name__in=named)}
    owners: dict[int, set[str]] = {}
    for pool_id, owner in Node.objects.filter(pool__in=pools.values()).exclude(dedicated_to="").values_list(
            "pool_id", "dedicated_to"):
        owners.setdefault(pool_id, set()).add(owner)
    violations: list[FieldViolation] = []

    def check(name: str, path: str) -> None:
        pool = pools.get(name)
        if pool is None:
            violations.append(FieldViolation(path, f"node pool {name!r} does not exist"))
        elif pool.location != location:
            violations.append(FieldViolation(path, f"node pool {name!r} is in {pool.location}, "
                                                   f"not in {location}"))
        elif pool.pk in owners:
            violations.append(FieldViolation(path, f"node pool {name!r} is already used by "
                                                   f"{', '.join(sorted(owners[pool.pk]))}"))

    for index, partition in enumerate(spec.partitions):
        for pool_index, name in enumerate(partition.pool_names):
            check(name, f"{SPEC}.partitions[{index}].nodePoolIds[{pool_index}]")
    if spec.login_pool:
        if spec.login_pool in {name for p in spec.partitions for name in p.pool_names}:
            violations.append(FieldViolation(f"{SPEC}.loginNodePoolId",
                                             f"node pool {spec.login_pool!r} is also a partition's compute pool"))
        else:
            check(spec.login_pool, f"{SPEC}.loginNodePoolId")
    return pools, violations


def cluster_create(*, project: Project, location: str, cluster_id: str, body: Any, user: AbstractBaseUser,
                   now: dt.datetime | None = None) -> SlurmCluster:
    """Create a cluster from its document; its pools' nodes become dedicated to it."""
    violations: list[FieldViolation] = []
    if not isinstance(cluster_id, str) or not CLUSTER_ID.match(cluster_id):
        violations.append(FieldViolation("slurmClusterId", "is required: lowercase letters, digits and '-', "
                                                           "starting with a letter (at most 63)"))
    try:
        spec = parse_cluster_spec(body)
    except ClusterSpecError as exc:
        raise invalid_argument(violations + exc.violations) from exc
    pools, pool_violations = _pool_violations(spec, location)
    violations += pool_violations
    if violations:
        raise invalid_argument(violations)
    now = now or timezone.now()
    with transaction.atomic():
        if SlurmCluster.objects.filter(project=project, location=location, cluster_id=cluster_id).exists():
            raise ApiError(409, f"SlurmCluster projects/{project.project_id}/locations/{location}/slurmClusters/"
                                f"{cluster_id} already exists.")
        cluster = SlurmCluster.objects.create(
            project=project, location=location, cluster_id=cluster_id, display_name=spec.display_name or cluster_id,
            login_pool=pools.get(spec.login_pool) if spec.login_pool else None,
            home_directory_storage=spec.home_directory_storage, config=spec.config.explicit,
            prolog_scripts=list(spec.prolog_scripts), epilog_scripts=list(spec.epilog_scripts),
            default_partition=spec.default_partition, created_by=user, create_time=now, update_time=now,
            last_decay_time=now, last_priority_time=now, last_usage_reset=now)
        for position, item in enumerate(spec.partitions):
            partition = Partition.objects.create(cluster=cluster, name=item.name, position=position,
                                                 config=item.options)
            partition.node_pools.set([pools[name] for name in item.pool_names])
        root = Account.objects.create(cluster=cluster, name=ROOT, description="default root account",
                                      organization=ROOT)
        # As `sacctmgr add cluster`: the root association allows (and defaults to) QOS normal.
        root_assoc = Association.objects.create(cluster=cluster, account=root, parent=None, shares=1,
                                                settings={"qos": [DEFAULT_QOS]})
        # ... and user root in account root (an administrator): a user association that Fair Tree
        # ranks with the others, as every real cluster has.
        SlurmUser.objects.create(cluster=cluster, name=ROOT, default_account=ROOT, admin_level="Administrator")
        Association.objects.create(cluster=cluster, account=root, user=ROOT, parent=root_assoc, shares=1)
        Qos.objects.create(cluster=cluster, name=DEFAULT_QOS, description="Normal QOS default")
        try:
            nodes_dedicate(nodes=list(Node.objects.filter(pool__in=pools.values())), owner=cluster.owner_key)
        except NodesUnavailable as exc:
            raise invalid_argument([FieldViolation(f"{SPEC}.partitions", str(exc))]) from exc
        audit(cluster, actor=user.get_username(), subject="cluster created", old=None,
              new={"partitions": [p.name for p in spec.partitions], "config": spec.config.explicit}, now=now)
    return cluster


@transaction.atomic
def cluster_delete(*, cluster: SlurmCluster) -> None:
    """Delete the cluster, its jobs and accounting; its nodes return to the shared pool (the agents
    stop whatever still ran there)."""
    owner = cluster.owner_key
    cluster.delete()
    nodes_release(owner=owner)


def _locked(cluster: SlurmCluster) -> SlurmCluster:
    return SlurmCluster.objects.select_for_update().get(pk=cluster.pk)


def cluster_config_set(*, cluster: SlurmCluster, changes: dict[str, Any], actor: str,
                       now: dt.datetime | None = None) -> SlurmCluster:
    """An admin's edit of slurm.conf keys (a None value unsets a key). The whole config is
    validated again; the next scheduler pass uses it, as Slurm's config maps do after a reconfigure."""
    now = now or timezone.now()
    with transaction.atomic():
        cluster = _locked(cluster)
        old = dict(cluster.config)
        try:
            new = parse_config(old).with_changes(changes).explicit
        except ConfigError as exc:
            raise invalid_argument([FieldViolation(f"config.{v.key}", v.description) for v in exc.violations]) from exc
        for key in sorted(set(old) | set(new)):
            if old.get(key) != new.get(key):
                audit(cluster, actor=actor, subject=f"slurm.conf {key}", old=old.get(key), new=new.get(key), now=now)
        cluster.config = new
        cluster.update_time = now
        # Every pending job's priority is recomputed by the next pass, with the new weights.
        cluster.last_priority_time = None
        cluster.save(update_fields=["config", "update_time", "last_priority_time"])
        request_pass(cluster)
    return cluster


SCRIPT_FIELDS = {"prolog": "prologBashScripts", "epilog": "epilogBashScripts"}


def cluster_scripts_set(*, cluster: SlurmCluster, kind: str, scripts: Any, actor: str,
                        now: dt.datetime | None = None) -> SlurmCluster:
    """Replace the cluster's prolog or epilog scripts; jobs starting (or ending) later run them."""
    if kind not in SCRIPT_FIELDS:
        raise ValueError(f"kind must be prolog or epilog, not {kind!r}")
    try:
        validated = list(validate_scripts(scripts, SCRIPT_FIELDS[kind]))
    except ClusterSpecError as exc:
        raise invalid_argument(exc.violations) from exc
    now = now or timezone.now()
    with transaction.atomic():
        cluster = _locked(cluster)
        attribute = f"{kind}_scripts"
        old = getattr(cluster, attribute)
        if old != validated:
            audit(cluster, actor=actor, subject=f"{kind} scripts", old=old, new=validated, now=now)
            setattr(cluster, attribute, validated)
            cluster.update_time = now
            cluster.save(update_fields=[attribute, "update_time"])
    return cluster


def _partition_pools(cluster: SlurmCluster, node_pool_ids: Any) -> list[NodePool]:
    """A partition's new pools: a non-empty list of the cluster's own compute pools (their nodes
    are the cluster's; pools join a cluster when it is created), each once."""
    if not isinstance(node_pool_ids, list) or not node_pool_ids:
        raise invalid_argument([FieldViolation("nodePoolIds", "must be a non-empty list of node pool ids")])
    own = {pool.name: pool for pool in NodePool.objects.filter(nodes__dedicated_to=cluster.owner_key).distinct()
           if pool.pk != cluster.login_pool_id}
    violations = []
    for index, name in enumerate(node_pool_ids):
        if not isinstance(name, str) or name not in own:
            violations.append(FieldViolation(f"nodePoolIds[{index}]", f"{name!r} is not a compute node pool of "
                                             f"cluster {cluster.cluster_id} ({', '.join(sorted(own))})"))
        elif node_pool_ids.index(name) != index:
            violations.append(FieldViolation(f"nodePoolIds[{index}]", f"node pool {name!r} is listed twice"))
    if violations:
        raise invalid_argument(violations)
    return [own[name] for name in node_pool_ids]


def partition_update(*, partition: Partition, actor: str, config: Any = None, node_pool_ids: Any = None,
                     now: dt.datetime | None = None) -> Partition:
    """``scontrol update PartitionName=P ...``: replace the partition's PartitionName= options
    (PriorityTier, MaxTime, MaxNodes, PreemptMode, ...) and/or its node pools; None leaves either
    as it is. Audited; the next pass recomputes priorities (PriorityJobFactor may have changed)."""
    if config is not None:
        if not isinstance(config, dict):
            raise invalid_argument([FieldViolation("config", "must be a map of PartitionName= options to values")])
        try:
            parse_partition_options(config)
        except ConfigError as exc:
            raise invalid_argument([FieldViolation(f"config.{v.key}", v.description)
                                    for v in exc.violations]) from exc
    pools = _partition_pools(partition.cluster, node_pool_ids) if node_pool_ids is not None else None
    now = now or timezone.now()
    with transaction.atomic():
        partition = Partition.objects.select_for_update().select_related("cluster").get(pk=partition.pk)
        changed = False
        new = {str(key): str(value) for key, value in config.items()} if config is not None else partition.config
        if partition.config != new:
            audit(partition.cluster, actor=actor, subject=f"partition {partition.name}", old=partition.config,
                  new=new, now=now)
            partition.config = new
            partition.save(update_fields=["config"])
            changed = True
        old_pools = sorted(pool.name for pool in partition.node_pools.all())
        if pools is not None and sorted(pool.name for pool in pools) != old_pools:
            audit(partition.cluster, actor=actor, subject=f"partition {partition.name} node pools", old=old_pools,
                  new=[pool.name for pool in pools], now=now)
            partition.node_pools.set(pools)
            changed = True
        if changed:
            SlurmCluster.objects.filter(pk=partition.cluster_id).update(last_priority_time=None)
            request_pass(partition.cluster)
    return partition


def node_state_set(*, cluster: SlurmCluster, node: Node, state: str, reason: str, actor: str,
                   now: dt.datetime | None = None) -> Node:
    """scontrol update nodename=N state=drain reason=... | state=resume (back to UP)."""
    if node.dedicated_to != cluster.owner_key:
        raise ApiError(404, f"Node {node.name} is not a node of cluster {cluster.cluster_id}.")
    if state not in (NodeState.UP, NodeState.DRAIN):
        raise invalid_argument([FieldViolation("state", "must be UP (resume) or DRAIN")])
    if state == NodeState.DRAIN and not reason.strip():
        raise invalid_argument([FieldViolation("reason", "a drained node needs a reason, as in scontrol")])
    now = now or timezone.now()
    with transaction.atomic():
        old = f"{node.state} {node.state_reason}".strip()
        node = node_set_state(node=node, state=state, reason=reason.strip() if state == NodeState.DRAIN else "")
        audit(cluster, actor=actor, subject=f"node {node.name}", old=old, new=f"{node.state} {node.state_reason}".strip(),
              now=now)
        request_pass(cluster)
    return node


def node_features_set(*, cluster: SlurmCluster, node: Node, available: str, active: str | None, actor: str,
                      now: dt.datetime | None = None) -> SlurmCluster:
    """``scontrol update NodeName=N AvailableFeatures=a100,ib [ActiveFeatures=a100]``: without
    ActiveFeatures the active ones are the available ones (slurm.conf's ``Features=``); active ones
    must be available (scontrol's ``Active features not subset of available features``)."""
    if node.dedicated_to != cluster.owner_key:
        raise ApiError(404, f"Node {node.name} is not a node of cluster {cluster.cluster_id}.")
    parsed: dict[str, tuple[str, ...]] = {}
    texts = {"availableFeatures": available, "activeFeatures": available if active is None else active}
    for field_name, text in texts.items():
        try:
            parsed[field_name] = features.parse_node_features(text)
        except features.FeatureError as exc:
            raise invalid_argument([FieldViolation(field_name, str(exc))]) from exc
    if not set(parsed["activeFeatures"]) <= set(parsed["availableFeatures"]):
        raise invalid_argument([FieldViolation("activeFeatures", features.NOT_SUBSET)])
    now = now or timezone.now()
    with transaction.atomic():
        cluster = _locked(cluster)
        old = cluster.node_features.get(node.name)
        new = {"available": list(parsed["availableFeatures"]), "active": list(parsed["activeFeatures"])}
        if new["available"]:
            cluster.node_features[node.name] = new
        else:
            cluster.node_features.pop(node.name, None)
        cluster.update_time = now
        cluster.save(update_fields=["node_features", "update_time"])
        audit(cluster, actor=actor, subject=f"features of node {node.name}", old=old, new=new, now=now)
        request_pass(cluster)
    return cluster


def node_weight_set(*, cluster: SlurmCluster, node: Node, weight: int | None, actor: str,
                    now: dt.datetime | None = None) -> SlurmCluster:
    """slurm.conf's ``NodeName=N Weight=W``: jobs get the usable nodes of the lowest weight first
    (scheduler); None gives it back Slurm's default, 1. A uint32 below INFINITE, as read_config.c
    takes it."""
    if node.dedicated_to != cluster.owner_key:
        raise ApiError(404, f"Node {node.name} is not a node of cluster {cluster.cluster_id}.")
    if weight is not None and not 0 <= weight <= NODE_WEIGHT_MAX:
        raise invalid_argument([FieldViolation("weight", f"must be a number from 0 to {NODE_WEIGHT_MAX} "
                                                         f"(default {DEFAULT_NODE_WEIGHT})")])
    return _node_setting_set(cluster, node, "node_weight", "Weight", None if weight == DEFAULT_NODE_WEIGHT else weight,
                             actor=actor, now=now)


def node_real_memory_set(*, cluster: SlurmCluster, node: Node, real_memory_mb: int | None, actor: str,
                         now: dt.datetime | None = None) -> SlurmCluster:
    """slurm.conf's ``NodeName=N RealMemory=MB``: what sinfo's MEMORY, scontrol's RealMemory and a
    job's memory (its TRES mem=, --mem placement) count for the node; None gives it back its machine
    type's memory. Slurm drains a node whose slurmd finds less memory than RealMemory ("Low
    RealMemory"), so more than the machine has is refused."""
    if node.dedicated_to != cluster.owner_key:
        raise ApiError(404, f"Node {node.name} is not a node of cluster {cluster.cluster_id}.")
    most = machine_memory_mb(node)
    if real_memory_mb is not None and not 1 <= real_memory_mb <= most:
        raise invalid_argument([FieldViolation("realMemory", f"must be a number of MB from 1 to {most} (node "
                                                             f"{node.name}'s memory; more is Low RealMemory)")])
    return _node_setting_set(cluster, node, "node_real_memory", "RealMemory", real_memory_mb, actor=actor, now=now)


def _node_setting_set(cluster: SlurmCluster, node: Node, field_name: str, label: str, value: int | None, *,
                      actor: str, now: dt.datetime | None) -> SlurmCluster:
    """Store one node's slurm.conf number in the cluster's ``field_name`` map (None: the default, not
    stored); a change is audited and asks for a pass."""
    now = now or timezone.now()
    with transaction.atomic():
        cluster = _locked(cluster)
        values = getattr(cluster, field_name)
        old = values.get(node.name)
        if value is None:
            values.pop(node.name, None)
        else:
            values[node.name] = value
        if old != value:
            audit(cluster, actor=actor, subject=f"{label} of node {node.name}", old=old, new=value, now=now)
            cluster.update_time = now
            cluster.save(update_fields=[field_name, "update_time"])
            request_pass(cluster)
    return cluster
