from django.urls import path

from trainhub.jobs import views

app_name = "jobs"

LOCATION = "projects/<str:project>/locations/<str:location>/jobs"
JOB = f"{LOCATION}/<str:job_id>"

urlpatterns = [
    path("", views.job_list, name="list"),
    path("jobs/rows", views.job_list, {"fragment": "rows"}, name="list_rows"),
    path("jobs/new", views.job_create_in_first_project, name="create_default"),
    path(f"{LOCATION}/new", views.job_create, name="create"),
    path("jobs/argv", views.argv_preview, name="argv_preview"),
    path(f"{JOB}/", views.job_detail, name="detail"),
    path(f"{JOB}/status", views.job_detail, {"fragment": "status"}, name="detail_status"),
    path(f"{JOB}/logs", views.job_detail, {"fragment": "logs"}, name="detail_logs"),
    path(f"{JOB}/cancel", views.job_cancel, name="cancel"),
]
