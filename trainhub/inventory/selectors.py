from django.db.models import Count, Prefetch, Q, QuerySet

from trainhub.inventory.models import Node, NodePool
from trainhub.jobs.models import Replica


def node_pools_with_usage() -> QuerySet[NodePool]:
    return NodePool.objects.annotate(
        node_total=Count("nodes", distinct=True),
        node_up=Count("nodes", filter=Q(nodes__state="UP"), distinct=True),
        node_busy=Count("nodes__replicas", filter=Q(nodes__replicas__active=True), distinct=True),
    ).order_by("name")


def nodes_for_agent(*, pool_names: list[str] | None) -> QuerySet[Node]:
    nodes = Node.objects.select_related("pool")
    if pool_names:
        nodes = nodes.filter(pool__name__in=pool_names)
    return nodes


def node_pools_with_nodes() -> list[NodePool]:
    """Every node pool with its usage counts, its nodes, and on each node ``active_replicas``
    (at most one: the replica occupying it, with its job and project)."""
    occupying = Replica.objects.filter(active=True).select_related("job__project")
    nodes = Node.objects.order_by("name").prefetch_related(
        Prefetch("replicas", queryset=occupying, to_attr="active_replicas"))
    return list(node_pools_with_usage().prefetch_related(Prefetch("nodes", queryset=nodes)))
