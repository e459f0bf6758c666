"""The nodes page: a card per pool (capacity and what is busy, down or held), and the nodes,
filtered and a page at a time, with the job occupying each. Both parts refresh live."""

from functools import partial

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse

from trainhub.iam.selectors import projects_with_permission
from trainhub.inventory.forms import NodeFilterForm
from trainhub.inventory.selectors import NodePage, node_pools_with_usage, nodes_page
from trainhub.common.pages import render_page_or_fragment

NODES_LIST = "aiplatform.nodes.list"
JOBS_GET = "aiplatform.customJobs.get"


def _pools_context(pools: list) -> dict:
    return {"pools": pools}


def _nodes_context(request: HttpRequest, pools: list) -> dict:
    form = NodeFilterForm(request.GET, pools=pools)
    page = NodePage([], "")
    if form.is_valid():
        data = form.cleaned_data
        page = nodes_page(pool=form.selected_pool(), state=data["state"], occupancy=data["occupancy"],
                          search=data["q"], after=data["after"])
    return {
        "filter_form": form, "node_page": page, "live": not request.GET.get("after"),
        # Jobs of every project occupy the nodes; only those the user may open are named.
        "visible_project_ids": {p.pk for p in projects_with_permission(user=request.user, permission=JOBS_GET)},
    }


@login_required
def node_list(request: HttpRequest, fragment: str | None = None) -> HttpResponse:
    if not projects_with_permission(user=request.user, permission=NODES_LIST):
        raise PermissionDenied(f"Seeing the nodes needs {NODES_LIST} in at least one project.")
    pools = list(node_pools_with_usage())
    sections = {"pools": ("inventory/_pool_cards.html", partial(_pools_context, pools)),
                "nodes": ("inventory/_node_rows.html", partial(_nodes_context, request, pools))}
    return render_page_or_fragment(request, "inventory/node_list.html", sections, fragment)
