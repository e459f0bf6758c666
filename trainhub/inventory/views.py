"""The nodes page: every node pool and node, and which job occupies each node."""

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from trainhub.iam.selectors import projects_with_permission
from trainhub.inventory.selectors import node_pools_with_nodes

NODES_LIST = "aiplatform.nodes.list"
JOBS_GET = "aiplatform.customJobs.get"


@login_required
def node_list(request: HttpRequest) -> HttpResponse:
    if not projects_with_permission(user=request.user, permission=NODES_LIST):
        raise PermissionDenied(f"Seeing the nodes needs {NODES_LIST} in at least one project.")
    return render(request, "inventory/node_list.html", {
        "pools": node_pools_with_nodes(),
        # Jobs of every project occupy the nodes; only those the user may open are named.
        "visible_project_ids": {p.pk for p in projects_with_permission(user=request.user, permission=JOBS_GET)},
    })
