import datetime as dt
import logging

from django.conf import settings
from django.db import transaction
from redis.exceptions import RedisError

from trainhub.common.redis import RedisNotConfigured, get_redis

from trainhub.catalog.machines import NO_ACCELERATOR, machine_type_get
from trainhub.inventory.models import Executor, Node, NodePool, NodeState
from trainhub.scheduling import working_memory
from trainhub.scheduling.pass_requests import request_pass

logger = logging.getLogger(__name__)


@transaction.atomic
def node_pool_ensure(
    *,
    name: str,
    machine_type: str,
    node_count: int,
    accelerator_type: str | None = None,
    accelerator_count: int | None = None,
    location: str = "us-central1",
    executor: str = Executor.SUBPROCESS,
    simulated_runtime_seconds: int = 30,
) -> NodePool:
    """Create or update a pool and grow it to ``node_count`` nodes (idempotent, never shrinks)."""
    machine = machine_type_get(machine_type)
    if machine is None:
        raise ValueError(f"unknown machine type {machine_type!r}")
    if accelerator_type is None:
        accelerator_type, accelerator_count = machine.fixed_gpu or (NO_ACCELERATOR, 0)
    pool, _ = NodePool.objects.update_or_create(
        name=name,
        defaults={
            "machine_type": machine_type,
            "accelerator_type": accelerator_type,
            "accelerator_count": accelerator_count or 0,
            "location": location,
            "executor": executor,
            "simulated_runtime_seconds": simulated_runtime_seconds,
        },
    )
    pool.full_clean()
    existing = pool.nodes.count()
    for index in range(existing, node_count):
        Node.objects.create(pool=pool, name=f"{name}-{index}", hostname=f"{name}-{index}")
    if node_count > existing:
        request_pass()  # new capacity: waiting jobs may fit now, not at the next beat
    return pool


@transaction.atomic
def node_heartbeat(*, node_ids: list[int], now: dt.datetime) -> None:
    """The database keeps the last heartbeat (the record); Redis keeps a TTL key per node."""
    Node.objects.filter(pk__in=node_ids).update(last_heartbeat=now)
    transaction.on_commit(lambda: _heartbeat_keys(node_ids, now))
    revived = Node.objects.filter(pk__in=node_ids, state=NodeState.DOWN, state_reason__startswith="heartbeat").update(
        state=NodeState.UP, state_reason=""
    )
    if revived:
        request_pass()


def _heartbeat_keys(node_ids: list[int], now: dt.datetime) -> None:
    try:
        working_memory.heartbeat(get_redis(), node_ids, now, settings.TRAINHUB_NODE_HEARTBEAT_TTL_SECONDS)
    except (RedisError, RedisNotConfigured):
        logger.warning("heartbeat keys not written: Redis did not answer", exc_info=True)


@transaction.atomic
def node_set_state(*, node: Node, state: str, reason: str = "") -> Node:
    """An admin's or the heartbeat sweep's change of a node's state (UP, DRAIN, DOWN)."""
    changed = node.state != state
    node.state = state
    node.state_reason = reason
    node.save(update_fields=["state", "state_reason"])
    if changed:
        request_pass()  # a node back UP is capacity; a drained or DOWN one changes what waits for what
    return node


class NodesUnavailable(Exception):
    """The inventory cannot supply the nodes asked for; the message says what is short."""


@transaction.atomic
def nodes_dedicate(*, nodes: list[Node], owner: str) -> list[Node]:
    """Give ``nodes`` exclusively to ``owner``; all or nothing.

    Refused if any node is already dedicated to someone else or still runs a shared replica, so a
    node never serves two masters.
    """
    from trainhub.jobs.models import Replica

    locked = list(Node.objects.select_for_update().filter(pk__in=[n.pk for n in nodes]).order_by("pk"))
    taken = [n.name for n in locked if n.dedicated_to not in ("", owner)]
    if taken:
        raise NodesUnavailable(f"node(s) {', '.join(taken)} are dedicated to something else")
    busy = sorted(Replica.objects.filter(node__in=locked, active=True).values_list("node__name", flat=True))
    if busy:
        raise NodesUnavailable(f"node(s) {', '.join(busy)} are running jobs")
    Node.objects.filter(pk__in=[n.pk for n in locked]).update(dedicated_to=owner)
    for node in locked:
        node.dedicated_to = owner
    return locked


@transaction.atomic
def nodes_release(*, owner: str, nodes: list[Node] | None = None) -> int:
    """Return every node ``owner`` holds (or only those of ``nodes`` it holds) to the shared pool."""
    held = Node.objects.filter(dedicated_to=owner)
    if nodes is not None:
        held = held.filter(pk__in=[node.pk for node in nodes])
    released = held.update(dedicated_to="")
    if released:
        request_pass()  # the shared pool grew
    return released
