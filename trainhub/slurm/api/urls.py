from django.urls import path

from trainhub.slurm.api import clusters, jobs, reports

CLUSTERS = "v1/projects/<str:project>/locations/<str:location>/slurmClusters"
CLUSTER = f"{CLUSTERS}/<str:cluster>"
JOB = f"{CLUSTER}/jobs/<str:slurm_job_id>"

urlpatterns = [
    path(CLUSTERS, clusters.SlurmClusterCollection.as_view(), name="slurmcluster-collection"),
    path(f"{CLUSTER}:updateConfig", clusters.SlurmClusterUpdateConfig.as_view(), name="slurmcluster-update-config"),
    path(f"{CLUSTER}:updateScripts", clusters.SlurmClusterUpdateScripts.as_view(),
         name="slurmcluster-update-scripts"),
    path(f"{CLUSTER}:sacctmgr", clusters.SlurmClusterSacctmgr.as_view(), name="slurmcluster-sacctmgr"),
    path(f"{CLUSTER}/slurmConf", clusters.SlurmConf.as_view(), name="slurmcluster-slurm-conf"),
    path(CLUSTER, clusters.SlurmClusterDetail.as_view(), name="slurmcluster-detail"),
    path(f"{CLUSTER}/partitions/<str:partition>", clusters.SlurmPartitionDetail.as_view(),
         name="slurmcluster-partition"),
    path(f"{CLUSTER}/nodes/<str:node>", clusters.SlurmNodeDetail.as_view(), name="slurmcluster-node"),
    path(f"{CLUSTER}/jobs", jobs.SlurmJobCollection.as_view(), name="slurmjob-collection"),
    path(f"{JOB}:cancel", jobs.SlurmJobCancel.as_view(), name="slurmjob-cancel"),
    path(f"{JOB}:hold", jobs.SlurmJobHold.as_view(), name="slurmjob-hold"),
    path(f"{JOB}:release", jobs.SlurmJobRelease.as_view(), name="slurmjob-release"),
    path(f"{JOB}:requeue", jobs.SlurmJobRequeue.as_view(), name="slurmjob-requeue"),
    path(f"{JOB}:update", jobs.SlurmJobUpdate.as_view(), name="slurmjob-update"),
    path(f"{CLUSTER}/allocations", jobs.SlurmAllocationCollection.as_view(), name="slurmjob-allocate"),
    path(f"{JOB}:keepAlive", jobs.SlurmAllocationKeepAlive.as_view(), name="slurmjob-keep-alive"),
    path(f"{JOB}:stepCredential", jobs.SlurmAllocationStepCredential.as_view(), name="slurmjob-step-credential"),
    path(f"{JOB}:relinquish", jobs.SlurmAllocationRelinquish.as_view(), name="slurmjob-relinquish"),
    path(f"{JOB}/log", jobs.SlurmJobLog.as_view(), name="slurmjob-log"),
    path(JOB, jobs.SlurmJobDetail.as_view(), name="slurmjob-detail"),
    path(f"{CLUSTER}/squeue", reports.SqueueView.as_view(), name="slurmcluster-squeue"),
    path(f"{CLUSTER}/sinfo", reports.SinfoView.as_view(), name="slurmcluster-sinfo"),
    path(f"{CLUSTER}/sprio", reports.SprioView.as_view(), name="slurmcluster-sprio"),
    path(f"{CLUSTER}/sshare", reports.SshareView.as_view(), name="slurmcluster-sshare"),
    path(f"{CLUSTER}/sacct", reports.SacctView.as_view(), name="slurmcluster-sacct"),
    path(f"{CLUSTER}/steps", reports.StepsView.as_view(), name="slurmcluster-steps"),
    path(f"{CLUSTER}/scontrolJobs", reports.ScontrolJobsView.as_view(), name="slurmcluster-scontrol-jobs"),
    path(f"{CLUSTER}/scontrolPartitions", reports.ScontrolPartitionsView.as_view(),
         name="slurmcluster-scontrol-partitions"),
    path(f"{CLUSTER}/scontrolNodes", reports.ScontrolNodesView.as_view(), name="slurmcluster-scontrol-nodes"),
]
