from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Exists, F, OuterRef, Prefetch, Q, QuerySet

from trainhub.common.compiled import CompiledQuery
from trainhub.iam.tokens import token_digest
from trainhub.inventory.models import JoinToken, Node, NodeCredential, NodePool, NodeState
from trainhub.jobs.models import Replica

NODE_PAGE_SIZE = 50


def node_pools_with_usage() -> list[NodePool]:
    """Every pool with its node counts: total, per state, dedicated, busy (a replica occupies it),
    busy among the shared nodes, and for its usage bar the idle dedicated, draining and down
    nodes and the free ones (up, idle, shared). Two queries: the busy
    counts come from the active replicas (at most one per node, on a partial index), never by
    joining every replica the pools' nodes ever ran."""
    pools = list(NodePool.objects.annotate(
        node_total=Count("nodes"),
        node_up=Count("nodes", filter=Q(nodes__state=NodeState.UP)),
        node_down=Count("nodes", filter=Q(nodes__state=NodeState.DOWN)),
        node_drain=Count("nodes", filter=Q(nodes__state=NodeState.DRAIN)),
        node_dedicated=Count("nodes", filter=~Q(nodes__dedicated_to="")),
    ).order_by("name"))
    busy = {row[0]: row[1:] for row in
            Replica.objects.filter(active=True).values("node__pool").order_by()
            .annotate(busy=Count("pk"), shared=Count("pk", filter=Q(node__dedicated_to="")),
                      draining=Count("pk", filter=Q(node__state=NodeState.DRAIN)),
                      down=Count("pk", filter=Q(node__state=NodeState.DOWN)))
            .values_list("node__pool", "busy", "shared", "draining", "down")}
    for pool in pools:
        pool.node_busy, pool.node_busy_shared, busy_draining, busy_down = busy.get(pool.pk, (0, 0, 0, 0))
        # What each node is doing, every node counted once: what the pool card's bar shows.
        pool.idle_dedicated = pool.node_dedicated - (pool.node_busy - pool.node_busy_shared)
        pool.idle_draining = pool.node_drain - busy_draining
        pool.idle_down = pool.node_down - busy_down
        pool.node_free = max(0, pool.node_total - pool.node_busy - pool.idle_dedicated - pool.idle_draining
                             - pool.idle_down)
    return pools


def nodes_for_agent(*, pool_names: list[str] | None) -> QuerySet[Node]:
    nodes = Node.objects.select_related("pool")
    if pool_names:
        nodes = nodes.filter(pool__name__in=pool_names)
    return nodes


#: The nodes page's occupancy filter: a node runs a replica, is free, or is held by one owner.
OCCUPANCY = {
    "busy": Q(busy=True),
    "idle": Q(busy=False, state=NodeState.UP, dedicated_to=""),
    "dedicated": ~Q(dedicated_to=""),
}


@dataclass(frozen=True)
class NodePage:
    nodes: list[Node]
    #: The name to continue after ("" on the last page).
    next_after: str


def nodes_page(*, pool: NodePool | None = None, state: str = "", occupancy: str = "", search: str = "",
               after: str = "", size: int = NODE_PAGE_SIZE) -> NodePage:
    """Nodes by name, keyset-paginated, each with ``active_replicas`` (at most one: the replica
    occupying it, with its job and project). Two queries, however many nodes the cluster has."""
    nodes = Node.objects.select_related("pool").only(
        "name", "state", "state_reason", "last_heartbeat", "dedicated_to", "pool__name").annotate(
        busy=Exists(Replica.objects.filter(node=OuterRef("pk"), active=True)))
    if pool is not None:
        nodes = nodes.filter(pool=pool)
    if state:
        nodes = nodes.filter(state=state)
    if occupancy:
        nodes = nodes.filter(OCCUPANCY[occupancy])
    if search:
        nodes = nodes.filter(name__startswith=search)
    if after:
        nodes = nodes.filter(name__gt=after)
    occupying = Replica.objects.filter(active=True).select_related("job__project").only(
        "node_id", "pool_index", "replica_index", "job__job_id", "job__display_name", "job__location",
        "job__project__project_id")
    page = list(nodes.order_by("name").prefetch_related(
        Prefetch("replicas", queryset=occupying, to_attr="active_replicas"))[: size + 1])
    return NodePage(page[:size], page[size - 1].name if len(page) > size else "")


@dataclass(frozen=True)
class NodeRef:
    """What an agent API call needs of the node its credential names (the full row only when it must)."""

    pk: int
    name: str
    state: str
    state_reason: str


_NODE_BY_CREDENTIAL = CompiledQuery(
    lambda digest: NodeCredential.objects.filter(digest=digest, revoked_at__isnull=True)
    .values_list("node_id", "node__name", "node__state", "node__state_reason")[:1],
    "\x00digest")


def node_by_credential(*, raw: str) -> NodeRef | None:
    """The node a live credential belongs to: one indexed statement, compiled once per process
    (every agent call pays it: about 1 ms of ORM work per call before it was compiled)."""
    rows = _NODE_BY_CREDENTIAL.rows(token_digest(raw))
    return NodeRef(*rows[0]) if rows else None


def join_tokens_live(*, now) -> list[JoinToken]:
    """The join tokens a machine could still join with: not revoked, expired or used up."""
    return list(JoinToken.objects.select_related("pool").filter(revoked_at__isnull=True, expires_at__gt=now)
                .filter(Q(max_uses__isnull=True) | Q(uses__lt=F("max_uses"))).order_by("-created_at"))


def joined_nodes() -> list[Node]:
    """Nodes an agent has joined, with whether their credential is live (two queries)."""
    live = NodeCredential.objects.filter(node=OuterRef("pk"), revoked_at__isnull=True)
    return list(Node.objects.filter(joined_at__isnull=False).select_related("pool")
                .annotate(credential_live=Exists(live)).order_by("pool__name", "name"))
