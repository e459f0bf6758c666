"""The nodes page: a card per pool (capacity and what is busy, down or held), the idle nodes held
for starving FLEX_START gangs, and the nodes, filtered and a page at a time, with the job occupying
or holding each. Every part refreshes live."""

import datetime as dt
from dataclasses import dataclass
from functools import partial

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache

from trainhub.iam.selectors import projects_with_permission
from trainhub.inventory.forms import JoinTokenForm, NodeActionForm, NodeFilterForm
from trainhub.inventory.models import JoinToken, NodeState
from trainhub.inventory.selectors import NodePage, join_tokens_live, joined_nodes, node_pools_with_usage, nodes_page
from trainhub.inventory.services import (
    NodeBusy,
    join_token_create,
    join_token_revoke,
    node_credential_revoke,
    node_remove,
    node_set_state,
)
from trainhub.common.pages import render_page_or_fragment
from trainhub.scheduling.selectors import flex_reservations

NODES_LIST = "aiplatform.nodes.list"
JOBS_GET = "aiplatform.customJobs.get"


def _pools_context(pools: list) -> dict:
    return {"pools": pools}


def _visible_project_ids(request: HttpRequest) -> set[int]:
    """Jobs of every project occupy or hold the nodes; only those the user may open are named."""
    return {p.pk for p in projects_with_permission(user=request.user, permission=JOBS_GET)}


def _reservations_context(request: HttpRequest) -> dict:
    """Idle nodes held for starving FLEX_START gangs (from the last scheduler pass, in Redis: no
    query but the user's projects)."""
    return {"reservations": flex_reservations(), "visible_project_ids": _visible_project_ids(request)}


def _nodes_context(request: HttpRequest, pools: list) -> dict:
    form = NodeFilterForm(request.GET, pools=pools)
    page = NodePage([], "")
    if form.is_valid():
        data = form.cleaned_data
        page = nodes_page(pool=form.selected_pool(), state=data["state"], occupancy=data["occupancy"],
                          search=data["q"], after=data["after"])
    held_for = {name: held for held in flex_reservations() for name, _ in held.nodes}
    visible = _visible_project_ids(request)
    owners = _dedication_owners({node.dedicated_to for node in page.nodes if node.dedicated_to}, visible)
    for node in page.nodes:
        node.held_for = held_for.get(node.name)
        node.owner = owners.get(node.dedicated_to)
    return {
        "filter_form": form, "node_page": page, "live": not request.GET.get("after"),
        "visible_project_ids": visible,
    }


@dataclass(frozen=True)
class DedicationOwner:
    """What a dedicated node serves, as the nodes page names it: "Slurm cluster demo-slurm", linked
    to its page, or only its kind when it belongs to a project the user cannot see."""

    kind: str
    name: str = ""
    url: str = ""


def _dedication_owners(keys: set[str], visible_project_ids: set[int]) -> dict[str, DedicationOwner]:
    """Node.dedicated_to holds an owner key (slurmClusters/<pk>, persistentResources/<pk>), which is
    no name for a reader: one query per kind finds the clusters and resources behind the keys. A key
    whose owner is gone stays as it is."""
    from trainhub.resources.models import PersistentResource
    from trainhub.slurm.models import SlurmCluster

    pks = {int(pk) for key in keys for pk in [key.rpartition("/")[2]] if pk.isdigit()}
    owners = {}
    for owner in SlurmCluster.objects.filter(pk__in=pks).select_related("project"):
        owners[owner.owner_key] = _owner(owner, "Slurm cluster", owner.cluster_id, visible_project_ids, reverse(
            "slurm:detail", kwargs={"project": owner.project.project_id, "location": owner.location,
                                    "cluster": owner.cluster_id}))
    for owner in PersistentResource.objects.filter(pk__in=pks).select_related("project"):
        owners[owner.owner] = _owner(owner, "persistent resource", owner.resource_id, visible_project_ids, reverse(
            "resources:detail", kwargs={"project": owner.project.project_id, "location": owner.location,
                                        "resource_id": owner.resource_id}))
    return {key: owner for key, owner in owners.items() if key in keys}


def _owner(owner, kind: str, name: str, visible_project_ids: set[int], url: str) -> DedicationOwner:
    if owner.project_id not in visible_project_ids:
        return DedicationOwner(kind=f"a {kind} of another project")
    return DedicationOwner(kind=kind, name=name, url=url)


@login_required
def node_list(request: HttpRequest, fragment: str | None = None) -> HttpResponse:
    if not projects_with_permission(user=request.user, permission=NODES_LIST):
        raise PermissionDenied(f"Seeing the nodes needs {NODES_LIST} in at least one project.")
    pools = list(node_pools_with_usage())
    sections = {"pools": ("inventory/_pool_cards.html", partial(_pools_context, pools)),
                "reservations": ("inventory/_reservations.html", partial(_reservations_context, request)),
                "nodes": ("inventory/_node_rows.html", partial(_nodes_context, request, pools))}
    return render_page_or_fragment(request, "inventory/node_list.html", sections, fragment)


#: Where a just-made join token waits, in the session, for the one page view that shows it.
_NEW_TOKEN = "trainhub_join_token_once"


@never_cache  # the page may show a secret
@login_required
def machines(request: HttpRequest) -> HttpResponse:
    """Admins add machines (a join token, shown once, with the command to run on the machine) and
    manage the joined ones: their discovered facts and last contact; drain, revoke, remove.

    Every press redirects back here (post/redirect/get), so reloading the page repeats nothing: the
    raw token waits in the session for that one view, as on the API token page."""
    if not request.user.is_staff:
        raise PermissionDenied("Adding and managing machines is for administrators.")
    now = timezone.now()
    token_form = JoinTokenForm()
    if request.method == "POST" and request.POST.get("form") == "token":
        token_form = JoinTokenForm(request.POST)
        if token_form.is_valid():
            data = token_form.cleaned_data
            token, raw = join_token_create(pool=data["pool"], created_by=request.user.get_username(), now=now,
                                           ttl=dt.timedelta(hours=data["expires_in_hours"]),
                                           max_uses=data["max_uses"], description=data["description"])
            request.session[_NEW_TOKEN] = {"pk": token.pk, "raw": raw}
            return redirect("inventory:machines")
    elif request.method == "POST" and request.POST.get("form") == "revoke-token":
        token = JoinToken.objects.filter(pk=request.POST.get("token")).select_related("pool").first()
        if token is not None:
            join_token_revoke(token=token, now=now)
            messages.success(request, f"Join token for pool {token.pool.name} revoked.")
        return redirect("inventory:machines")
    elif request.method == "POST":
        action_form = NodeActionForm(request.POST)
        if not action_form.is_valid():
            return HttpResponseBadRequest("Unknown node or action.")
        _node_action(request, action_form.cleaned_data["node"], action_form.cleaned_data["action"], now)
        return redirect("inventory:machines")
    return render(request, "inventory/machines.html", {
        "token_form": token_form, "new_token": _new_token(request),
        "join_tokens": join_tokens_live(now=now), "machines": joined_nodes(),
    })


def _new_token(request: HttpRequest) -> dict | None:
    """The join token made by the POST that redirected here, once: with its raw value and the URL
    its agent joins; None on any other view."""
    made = request.session.pop(_NEW_TOKEN, None)
    token = made and JoinToken.objects.filter(pk=made["pk"]).select_related("pool").first()
    if not token:
        return None
    return {"token": token, "raw": made["raw"], "url": request.build_absolute_uri("/").rstrip("/")}


def _node_action(request: HttpRequest, node, action: str, now) -> None:
    """Do one machine button's action and say what it did (or why it could not) on the next page."""
    if action == "drain":
        node_set_state(node=node, state=NodeState.DRAIN, reason="drained by an admin")
        messages.success(request, f"{node.name} drains: its running job finishes; nothing new is placed there.")
    elif action == "undrain":
        node_set_state(node=node, state=NodeState.UP, reason="")
        messages.success(request, f"{node.name} is back in service.")
    elif action == "revoke":
        node_credential_revoke(node=node, now=now)
        messages.success(request, f"{node.name}'s credential is revoked: its agent is cut off and the node is DOWN.")
    else:
        try:
            node_remove(node=node)
        except NodeBusy as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, f"{node.name} removed.")
