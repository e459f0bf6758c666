from django.urls import path

from trainhub.tuning import views

app_name = "tuning"

LOCATION = "projects/<str:project>/locations/<str:location>/hyperparameterTuningJobs"
JOB = f"{LOCATION}/<str:tuning_job_id>"

urlpatterns = [
    path("tuning/", views.tuning_list, name="list"),
    path("tuning/rows", views.tuning_list, {"fragment": "rows"}, name="list_rows"),
    path("tuning/new", views.tuning_create_in_first_project, name="create_default"),
    path("models/", views.model_list, name="models"),
    path(f"{LOCATION}/new", views.tuning_create, name="create"),
    path(f"{JOB}/", views.tuning_detail, name="detail"),
    path(f"{JOB}/status", views.tuning_detail, {"fragment": "status"}, name="detail_status"),
    path(f"{JOB}/charts", views.tuning_detail, {"fragment": "charts"}, name="detail_charts"),
    path(f"{JOB}/cancel", views.tuning_cancel, name="cancel"),
]
