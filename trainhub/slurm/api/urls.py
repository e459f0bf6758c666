from django.urls import path

from trainhub.slurm.api import clusters

CLUSTERS = "v1/projects/<str:project>/locations/<str:location>/slurmClusters"
CLUSTER = f"{CLUSTERS}/<str:cluster>"

urlpatterns = [
    path(CLUSTERS, clusters.SlurmClusterCollection.as_view(), name="slurmcluster-collection"),
    path(f"{CLUSTER}:updateConfig", clusters.SlurmClusterUpdateConfig.as_view(), name="slurmcluster-update-config"),
    path(f"{CLUSTER}:updateScripts", clusters.SlurmClusterUpdateScripts.as_view(),
         name="slurmcluster-update-scripts"),
    path(f"{CLUSTER}/slurmConf", clusters.SlurmConf.as_view(), name="slurmcluster-slurm-conf"),
    path(CLUSTER, clusters.SlurmClusterDetail.as_view(), name="slurmcluster-detail"),
]
