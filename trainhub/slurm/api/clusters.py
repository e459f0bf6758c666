"""slurmClusters: create (admins), get, list, delete (admins), slurm.conf, config and script edits."""

from __future__ import annotations

from django.db import transaction
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from trainhub.common.errors import ApiError, FieldViolation, invalid_argument
from trainhub.common.wire import WireError, camel_key, parse_int
from trainhub.iam.selectors import project_get_for_user
from trainhub.slurm import selectors
from trainhub.slurm.api.schema import (BODY, CLUSTER, ERRORS, SACCTMGR, UPDATE_CONFIG, UPDATE_NODE,
                                       UPDATE_PARTITION, UPDATE_SCRIPTS, responses)
from trainhub.slurm.models import Partition
from trainhub.slurm.render import render_cluster, render_partition
from trainhub.slurm.selectors import ADMIN_PERMISSION, cluster_get_for_user
from trainhub.slurm.services import clusters as services
from trainhub.slurm.services.sacctmgr import sacctmgr_run
from trainhub.slurm.slurmconf import cluster_slurm_conf

GET = "aiplatform.slurmClusters.get"
LIST = "aiplatform.slurmClusters.list"
CREATE = "aiplatform.slurmClusters.create"
DELETE = "aiplatform.slurmClusters.delete"


def cluster_for(request: Request, project: str, location: str, cluster: str, permission: str = GET):
    return cluster_get_for_user(user=request.user, project_id=project, location=location, cluster_id=cluster,
                                permission=permission)


def _render(cluster) -> dict:
    return render_cluster(cluster, selectors.cluster_partitions(cluster=cluster), selectors.cluster_nodes(cluster=cluster))


def _object(request: Request) -> dict:
    if not isinstance(request.data, dict):
        raise invalid_argument([FieldViolation("body", "must be a JSON object")])
    return request.data


class SlurmClusterCollection(APIView):
    @extend_schema(operation_id="slurmClusters.list", responses=responses(BODY, ERRORS))
    def get(self, request: Request, project: str, location: str) -> Response:
        project_obj = project_get_for_user(user=request.user, project_id=project, permission=LIST)
        clusters = selectors.clusters_list(project=project_obj, location=location)
        return Response({"slurmClusters": [render_cluster(c, list(c.partitions.all())) for c in clusters]})

    @extend_schema(operation_id="slurmClusters.create", parameters=[OpenApiParameter("slurmClusterId", str)],
                   request={"application/json": CLUSTER}, responses=responses(BODY, ERRORS))
    def post(self, request: Request, project: str, location: str) -> Response:
        project_obj = project_get_for_user(user=request.user, project_id=project, permission=CREATE)
        selectors.require_platform_admin(user=request.user, project=project_obj)
        cluster = services.cluster_create(project=project_obj, location=location,
                                          cluster_id=request.query_params.get("slurmClusterId", ""),
                                          body=request.data, user=request.user)
        return Response(_render(cluster))


class SlurmClusterDetail(APIView):
    @extend_schema(operation_id="slurmClusters.get", responses=responses(BODY, ERRORS))
    def get(self, request: Request, project: str, location: str, cluster: str) -> Response:
        return Response(_render(cluster_for(request, project, location, cluster)))

    @extend_schema(operation_id="slurmClusters.delete", responses=responses(BODY, ERRORS))
    def delete(self, request: Request, project: str, location: str, cluster: str) -> Response:
        cluster_obj = cluster_for(request, project, location, cluster, DELETE)
        name = cluster_obj.resource_name
        services.cluster_delete(cluster=cluster_obj)
        return Response({"name": f"{name}/operations/delete", "done": True,
                         "response": {"@type": "type.googleapis.com/google.protobuf.Empty"}})


class SlurmConf(APIView):
    """The cluster's slurm.conf as text (``content``)."""

    @extend_schema(operation_id="slurmClusters.slurmConf", responses=responses(BODY, ERRORS))
    def get(self, request: Request, project: str, location: str, cluster: str) -> Response:
        return Response({"content": cluster_slurm_conf(cluster_for(request, project, location, cluster))})


class SlurmClusterUpdateConfig(APIView):
    """Admins set slurm.conf keys ({"config": {"PriorityWeightAge": "2000", "PreemptMode": null}})."""

    @extend_schema(operation_id="slurmClusters.updateConfig", request={"application/json": UPDATE_CONFIG}, responses=responses(BODY, ERRORS))
    def post(self, request: Request, project: str, location: str, cluster: str) -> Response:
        cluster_obj = cluster_for(request, project, location, cluster, ADMIN_PERMISSION)
        changes = _object(request).get("config")
        if not isinstance(changes, dict) or not changes:
            raise invalid_argument([FieldViolation("config", "must be a non-empty map of slurm.conf keys to "
                                                             "values (null unsets a key)")])
        cluster_obj = services.cluster_config_set(cluster=cluster_obj, changes=changes,
                                                  actor=request.user.get_username())
        return Response(_render(cluster_obj))


class SlurmPartitionDetail(APIView):
    """A partition: members read it; admins change its options and/or node pools
    ({"config": {"PriorityTier": "2", "MaxTime": "1-00:00:00"}, "nodePoolIds": ["a4"]}; a field
    left out stays as it is; ``config`` replaces the partition's options)."""

    def _partition(self, request: Request, project: str, location: str, cluster: str, partition: str,
                   permission: str) -> Partition:
        cluster_obj = cluster_for(request, project, location, cluster, permission)
        row = next((p for p in selectors.cluster_partitions(cluster=cluster_obj) if p.name == partition), None)
        if row is None:
            raise ApiError(404, f"Partition {partition} of cluster {cluster_obj.cluster_id} not found.")
        return row

    @extend_schema(operation_id="slurmClusters.partitions.get", responses=responses(BODY, ERRORS))
    def get(self, request: Request, project: str, location: str, cluster: str, partition: str) -> Response:
        row = self._partition(request, project, location, cluster, partition, GET)
        return Response(render_partition(row, row.cluster.default_partition))

    @extend_schema(operation_id="slurmClusters.partitions.patch", request={"application/json": UPDATE_PARTITION},
                   responses=responses(BODY, ERRORS))
    def patch(self, request: Request, project: str, location: str, cluster: str, partition: str) -> Response:
        row = self._partition(request, project, location, cluster, partition, ADMIN_PERMISSION)
        body = {camel_key(str(key)): value for key, value in _object(request).items()}
        unknown = [key for key in body if key not in ("config", "nodePoolIds")]
        if unknown or not body:
            raise invalid_argument([FieldViolation(key, "unknown field") for key in unknown] or [
                FieldViolation("body", "give config and/or nodePoolIds")])
        row = services.partition_update(partition=row, config=body.get("config"),
                                        node_pool_ids=body.get("nodePoolIds"), actor=request.user.get_username())
        return Response(render_partition(row, row.cluster.default_partition))


#: The node's numeric fields and an example of each.
_NODE_NUMBERS = {"realMemory": "MB, 16000", "weight": "10"}


class SlurmNodeDetail(APIView):
    """Admins set a node's features, as ``scontrol update NodeName=N AvailableFeatures=a100,ib
    ActiveFeatures=a100,ib`` ({"availableFeatures": "a100,ib", "activeFeatures": "a100"}; without
    activeFeatures every available feature is active; "" removes them), and/or its slurm.conf
    RealMemory in MB ({"realMemory": 16000}; null: its machine type's memory) and/or Weight
    ({"weight": 10}; null: 1). Returns the cluster."""

    @extend_schema(operation_id="slurmClusters.nodes.patch", request={"application/json": UPDATE_NODE},
                   responses=responses(BODY, ERRORS))
    def patch(self, request: Request, project: str, location: str, cluster: str, node: str) -> Response:
        cluster_obj = cluster_for(request, project, location, cluster, ADMIN_PERMISSION)
        node_obj = selectors.cluster_node(cluster=cluster_obj, name=node)
        body = {camel_key(str(key)): value for key, value in _object(request).items()}
        violations = [FieldViolation(key, "unknown field") for key in body
                      if key not in ("availableFeatures", "activeFeatures", *_NODE_NUMBERS)]
        violations += [FieldViolation(key, "must be a string (a100,ib)") for key in body
                       if key in ("availableFeatures", "activeFeatures") and not isinstance(body[key], str)]
        if "availableFeatures" not in body and ("activeFeatures" in body or not set(_NODE_NUMBERS) & set(body)):
            violations.append(FieldViolation("availableFeatures", "required (a100,ib; \"\" for none)"))
        numbers: dict[str, int | None] = {}
        for key, example in _NODE_NUMBERS.items():
            if body.get(key) is not None:
                try:
                    numbers[key] = parse_int(body[key])
                except WireError as exc:
                    violations.append(FieldViolation(key, f"{exc} ({example}) or null"))
        if violations:
            raise invalid_argument(violations)
        actor = request.user.get_username()
        with transaction.atomic():  # all or nothing: a setting refused undoes those set before it
            if "availableFeatures" in body:
                cluster_obj = services.node_features_set(cluster=cluster_obj, node=node_obj,
                                                         available=body["availableFeatures"],
                                                         active=body.get("activeFeatures"), actor=actor)
            if "realMemory" in body:
                cluster_obj = services.node_real_memory_set(cluster=cluster_obj, node=node_obj,
                                                            real_memory_mb=numbers.get("realMemory"), actor=actor)
            if "weight" in body:
                cluster_obj = services.node_weight_set(cluster=cluster_obj, node=node_obj,
                                                       weight=numbers.get("weight"), actor=actor)
        return Response(_render(cluster_obj))


class SlurmClusterUpdateScripts(APIView):
    """Admins replace the prolog and/or epilog scripts."""

    @extend_schema(operation_id="slurmClusters.updateScripts", request={"application/json": UPDATE_SCRIPTS}, responses=responses(BODY, ERRORS))
    def post(self, request: Request, project: str, location: str, cluster: str) -> Response:
        cluster_obj = cluster_for(request, project, location, cluster, ADMIN_PERMISSION)
        kinds = {field: kind for kind, field in services.SCRIPT_FIELDS.items()}
        body = {camel_key(str(key)): value for key, value in _object(request).items()}
        unknown = [key for key in body if key not in kinds]
        if unknown or not body:
            raise invalid_argument([FieldViolation(key, "unknown field") for key in unknown] or [
                FieldViolation("prologBashScripts", "give prologBashScripts and/or epilogBashScripts")])
        for field, scripts in body.items():
            cluster_obj = services.cluster_scripts_set(cluster=cluster_obj, kind=kinds[field], scripts=scripts,
                                                       actor=request.user.get_username())
        return Response(_render(cluster_obj))


class SlurmClusterSacctmgr(APIView):
    """{"command": "sacctmgr -i add user uma account=ml"} (a string, or its argument list) ->
    {"output", "exitCode", "needsConfirmation"}. Everyone may `show`; changes need an admin."""

    @extend_schema(operation_id="slurmClusters.sacctmgr", request={"application/json": SACCTMGR}, responses=responses(BODY, ERRORS))
    def post(self, request: Request, project: str, location: str, cluster: str) -> Response:
        cluster_obj = cluster_for(request, project, location, cluster)
        line = _object(request).get("command")
        if not (isinstance(line, str) or (isinstance(line, list) and all(isinstance(w, str) for w in line))):
            raise invalid_argument([FieldViolation("command", "must be a sacctmgr command line or its argument list")])
        result = sacctmgr_run(cluster=cluster_obj, line=line, actor=request.user.get_username(),
                              is_admin=selectors.is_cluster_admin(user=request.user, cluster=cluster_obj))
        return Response({"output": result.output, "exitCode": result.exit_code,
                         "needsConfirmation": result.needs_confirmation})
