"""Cluster pages: the list, a cluster's detail (partitions, nodes, config, scripts, audit), the
slurm.conf download, and the admin edits (config keys, scripts, partition options, node state and features)."""

from __future__ import annotations

from collections.abc import Callable

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from trainhub.common.errors import ApiError
from trainhub.iam.selectors import projects_with_permission
from trainhub.common.pages import html_page
from trainhub.inventory.models import Node
from trainhub.slurm import selectors
from trainhub.slurm.forms.clusters import (
    ConfigForm,
    NodeFeaturesForm,
    NodeMemoryForm,
    NodeWeightForm,
    NodeStateForm,
    PartitionForm,
    ScriptsForm,
    key_value_text,
)
from trainhub.slurm.models import Partition, SlurmCluster
from trainhub.slurm.services import clusters as services
from trainhub.slurm.slurmconf import cluster_slurm_conf, node_weight, real_memory_mb
from trainhub.slurm.views.common import ADMIN, cluster_context, cluster_for, cluster_kwargs

LIST = "aiplatform.slurmClusters.list"


@html_page
def cluster_list(request: HttpRequest) -> HttpResponse:
    projects = projects_with_permission(user=request.user, permission=LIST)
    clusters = list(SlurmCluster.objects.filter(project__in=projects).select_related("project")
                    .prefetch_related("partitions").order_by("project__project_id", "location", "cluster_id"))
    simulated = selectors.simulated_owner_keys()
    for cluster in clusters:
        cluster.simulated = cluster.owner_key in simulated
    return render(request, "slurm/cluster_list.html", {"clusters": clusters})


@html_page
def cluster_detail(request: HttpRequest, project: str, location: str, cluster: str) -> HttpResponse:
    cluster_obj = cluster_for(request, project, location, cluster)
    context = cluster_context(request, cluster_obj, "detail")
    nodes = selectors.cluster_nodes(cluster=cluster_obj)
    features = {name: {kind: ",".join(names) for kind, names in lists.items()}
                for name, lists in cluster_obj.node_features.items()}
    context.update(partitions=selectors.cluster_partitions(cluster=cluster_obj),
                   nodes=[(node, features.get(node.name, {}), real_memory_mb(node, cluster_obj), node_weight(node, cluster_obj))
                          for node in nodes],
                   audit=selectors.cluster_audit(cluster=cluster_obj))
    return render(request, "slurm/cluster_detail.html", context)


@html_page
def slurm_conf(request: HttpRequest, project: str, location: str, cluster: str) -> HttpResponse:
    cluster_obj = cluster_for(request, project, location, cluster)
    response = HttpResponse(cluster_slurm_conf(cluster_obj), content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="slurm-{cluster_obj.cluster_id}.conf"'
    return response


def _back(cluster: SlurmCluster) -> HttpResponse:
    return redirect("slurm:detail", **cluster_kwargs(cluster))


@html_page
def config_edit(request: HttpRequest, project: str, location: str, cluster: str) -> HttpResponse:
    cluster_obj = cluster_for(request, project, location, cluster, ADMIN)
    form = ConfigForm(request.POST or None, initial={"text": key_value_text(cluster_obj.config)})
    if request.method == "POST" and form.is_valid():
        changes = form.changes(cluster_obj.config)
        try:
            services.cluster_config_set(cluster=cluster_obj, changes=changes, actor=request.user.get_username())
        except ApiError as error:
            form.show_service_error(error)
        else:
            messages.success(request, f"slurm.conf updated ({len(changes)} key(s)); the next scheduler pass uses it.")
            return _back(cluster_obj)
    return render(request, "slurm/config_edit.html", {**cluster_context(request, cluster_obj, "detail"),
                                                      "form": form, "title": "slurm.conf keys"})


@html_page
def scripts_edit(request: HttpRequest, project: str, location: str, cluster: str, kind: str) -> HttpResponse:
    cluster_obj = cluster_for(request, project, location, cluster, ADMIN)
    form = ScriptsForm(request.POST or None, scripts=getattr(cluster_obj, f"{kind}_scripts"))
    if request.method == "POST" and form.is_valid():
        try:
            services.cluster_scripts_set(cluster=cluster_obj, kind=kind, scripts=form.scripts(),
                                         actor=request.user.get_username())
        except ApiError as error:
            form.show_service_error(error)
        else:
            messages.success(request, f"{kind.capitalize()} scripts saved; jobs run them from now on.")
            return _back(cluster_obj)
    return render(request, "slurm/scripts_edit.html", {**cluster_context(request, cluster_obj, "detail"),
                                                       "form": form, "kind": kind})


@html_page
def partition_edit(request: HttpRequest, project: str, location: str, cluster: str, partition: str) -> HttpResponse:
    cluster_obj = cluster_for(request, project, location, cluster, ADMIN)
    row = Partition.objects.filter(cluster=cluster_obj, name=partition).first()
    if row is None:
        raise ApiError(404, f"Partition {partition} not found.")
    form = PartitionForm(request.POST or None, initial={
        "text": key_value_text(row.config), "node_pools": ", ".join(pool.name for pool in row.node_pools.all())})
    if request.method == "POST" and form.is_valid():
        try:
            services.partition_update(partition=row, config=form.cleaned_data["text"],
                                      node_pool_ids=form.cleaned_data["node_pools"], actor=request.user.get_username())
        except ApiError as error:
            form.show_service_error(error)
        else:
            messages.success(request, f"Partition {row.name} updated.")
            return _back(cluster_obj)
    return render(request, "slurm/config_edit.html", {**cluster_context(request, cluster_obj, "detail"),
                                                      "form": form, "title": f"Partition {row.name}",
                                                      "help": "PriorityTier, PriorityJobFactor, MaxTime, "
                                                              "DefaultTime, MaxNodes, State, PreemptMode, GraceTime, "
                                                              "TRESBillingWeights, AllowAccounts, AllowQos, QOS"})


def _node_form(request: HttpRequest, project: str, location: str, cluster: str, node: str,
               form_class: type[forms.Form], change: Callable[[SlurmCluster, Node, dict, str], str]) -> HttpResponse:
    """An admin's form on one node of the cluster page: ``change(cluster, node, cleaned data, actor)``
    applies it and says what it did; errors come back as messages."""
    cluster_obj = cluster_for(request, project, location, cluster, ADMIN)
    node_obj = selectors.cluster_node(cluster=cluster_obj, name=node)
    form = form_class(request.POST)
    if not form.is_valid():
        messages.error(request, "; ".join(f"{name}: {' '.join(errors)}" for name, errors in form.errors.items()))
        return _back(cluster_obj)
    try:
        messages.success(request, change(cluster_obj, node_obj, form.cleaned_data, request.user.get_username()))
    except ApiError as error:
        messages.error(request, error.message)
    return _back(cluster_obj)


@require_POST
@html_page
def node_features(request: HttpRequest, project: str, location: str, cluster: str, node: str) -> HttpResponse:
    def change(cluster_obj: SlurmCluster, node_obj: Node, data: dict, actor: str) -> str:
        services.node_features_set(cluster=cluster_obj, node=node_obj, available=data["available"],
                                   active=data["active"] or None, actor=actor)
        return f"Node {node_obj.name} features updated."
    return _node_form(request, project, location, cluster, node, NodeFeaturesForm, change)


@require_POST
@html_page
def node_memory(request: HttpRequest, project: str, location: str, cluster: str, node: str) -> HttpResponse:
    def change(cluster_obj: SlurmCluster, node_obj: Node, data: dict, actor: str) -> str:
        services.node_real_memory_set(cluster=cluster_obj, node=node_obj, real_memory_mb=data["real_memory"],
                                      actor=actor)
        return f"Node {node_obj.name} RealMemory updated."
    return _node_form(request, project, location, cluster, node, NodeMemoryForm, change)


@require_POST
@html_page
def node_weight_update(request: HttpRequest, project: str, location: str, cluster: str, node: str) -> HttpResponse:
    def change(cluster_obj: SlurmCluster, node_obj: Node, data: dict, actor: str) -> str:
        services.node_weight_set(cluster=cluster_obj, node=node_obj, weight=data["weight"], actor=actor)
        return f"Node {node_obj.name} Weight updated."
    return _node_form(request, project, location, cluster, node, NodeWeightForm, change)


@require_POST
@html_page
def node_state(request: HttpRequest, project: str, location: str, cluster: str, node: str) -> HttpResponse:
    def change(cluster_obj: SlurmCluster, node_obj: Node, data: dict, actor: str) -> str:
        services.node_state_set(cluster=cluster_obj, node=node_obj, state=data["state"], reason=data["reason"],
                                actor=actor)
        return f"Node {node_obj.name} is now {data['state']}."
    return _node_form(request, project, location, cluster, node, NodeStateForm, change)
