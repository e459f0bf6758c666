from django.urls import path

from trainhub.inventory import agent_api, step_api

urlpatterns = [
    path("agent/v1/join", agent_api.Join.as_view(), name="agent-join"),
    path("agent/v1/heartbeat", agent_api.Heartbeat.as_view(), name="agent-heartbeat"),
    path("agent/v1/assignments", agent_api.Assignments.as_view(), name="agent-assignments"),
    path("agent/v1/replicas/<int:replica_id>/started", agent_api.ReplicaStarted.as_view(), name="agent-replica-started"),
    path("agent/v1/replicas/<int:replica_id>/logs", agent_api.ReplicaLogs.as_view(), name="agent-replica-logs"),
    path("agent/v1/replicas/<int:replica_id>/exited", agent_api.ReplicaExited.as_view(), name="agent-replica-exited"),
    path("agent/v1/srun/steps", step_api.Steps.as_view(), name="agent-srun-steps"),
    path("agent/v1/srun/steps/<int:step_id>", step_api.Step.as_view(), name="agent-srun-step"),
    path("agent/v1/srun/steps/<int:step_id>:cancel", step_api.StepCancel.as_view(), name="agent-srun-step-cancel"),
    path("agent/v1/srun/steps/<int:step_id>:input", step_api.StepInputView.as_view(), name="agent-srun-step-input"),
    path("agent/v1/slurm/tasks/<int:step_node_id>/<int:task>/logs", step_api.TaskLogs.as_view(),
         name="agent-slurm-task-logs"),
    path("agent/v1/slurm/tasks/<int:step_node_id>/exited", step_api.TasksExited.as_view(),
         name="agent-slurm-tasks-exited"),
    path("agent/v1/slurm/tasks/<int:step_node_id>/input", step_api.TaskInputDelivered.as_view(),
         name="agent-slurm-task-input"),
    path("agent/v1/slurm/<int:job_node_id>/logs", agent_api.SlurmLogs.as_view(), name="agent-slurm-logs"),
    path("agent/v1/slurm/<int:job_node_id>/<str:event>", agent_api.SlurmReport.as_view(), name="agent-slurm-report"),
]
