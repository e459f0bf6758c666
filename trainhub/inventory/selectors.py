from django.db.models import Count, Q, QuerySet

from trainhub.inventory.models import Node, NodePool


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
