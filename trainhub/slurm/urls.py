from django.urls import path, register_converter

from trainhub.slurm.views import accounting, clusters, jobs, reports

app_name = "slurm"


class ScriptKind:
    """The two script lists a cluster keeps: any other kind is no page (404), not an error."""

    regex = "prolog|epilog"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(ScriptKind, "script_kind")

CLUSTER = "projects/<str:project>/locations/<str:location>/clusters/<str:cluster>"
JOB = f"{CLUSTER}/jobs/<str:slurm_job_id>"

urlpatterns = [
    path("", clusters.cluster_list, name="list"),
    path(f"{CLUSTER}/", clusters.cluster_detail, name="detail"),
    path(f"{CLUSTER}/slurm.conf", clusters.slurm_conf, name="slurm_conf"),
    path(f"{CLUSTER}/config", clusters.config_edit, name="config"),
    path(f"{CLUSTER}/scripts/<script_kind:kind>", clusters.scripts_edit, name="scripts"),
    path(f"{CLUSTER}/partitions/<str:partition>", clusters.partition_edit, name="partition"),
    path(f"{CLUSTER}/nodes/<str:node>/state", clusters.node_state, name="node_state"),
    path(f"{CLUSTER}/nodes/<str:node>/features", clusters.node_features, name="node_features"),
    path(f"{CLUSTER}/nodes/<str:node>/memory", clusters.node_memory, name="node_memory"),
    path(f"{CLUSTER}/nodes/<str:node>/weight", clusters.node_weight_update, name="node_weight"),
    path(f"{CLUSTER}/queue", reports.queue_page, name="queue"),
    path(f"{CLUSTER}/priority", reports.priority_page, name="priority"),
    path(f"{CLUSTER}/fairshare", reports.fairshare_page, name="fairshare"),
    path(f"{CLUSTER}/accounting", reports.accounting_page, name="accounting"),
    path(f"{CLUSTER}/nodes", reports.nodes_page, name="nodes"),
    path(f"{CLUSTER}/sacctmgr", accounting.console, name="sacctmgr"),
    path(f"{CLUSTER}/accounts", accounting.accounts, name="accounts"),
    path(f"{CLUSTER}/accounts/associations/<int:pk>", accounting.association_edit, name="association"),
    path(f"{CLUSTER}/accounts/qos/<str:name>", accounting.qos_edit, name="qos"),
    path(f"{CLUSTER}/jobs/new", jobs.job_submit, name="submit"),
    path(f"{JOB}/", jobs.job_detail, name="job"),
    path(f"{JOB}/status", jobs.job_detail, {"fragment": "status"}, name="job_status"),
    path(f"{JOB}/log", jobs.job_detail, {"fragment": "log"}, name="job_log"),
    path(f"{JOB}/action", jobs.job_action, name="job_action"),
    path(f"{JOB}/priority", reports.job_priority, name="job_priority"),
]
