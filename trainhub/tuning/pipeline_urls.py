from django.urls import path

from trainhub.tuning import pipeline_views as views

app_name = "pipelines"

LOCATION = "projects/<str:project>/locations/<str:location>/trainingPipelines"
PIPELINE = f"{LOCATION}/<str:pipeline_id>"

urlpatterns = [
    path("pipelines/", views.pipeline_list, name="list"),
    path("pipelines/rows", views.pipeline_list, {"fragment": "rows"}, name="list_rows"),
    path("pipelines/new", views.pipeline_create_in_first_project, name="create_default"),
    path(f"{LOCATION}/new", views.pipeline_create, name="create"),
    path(f"{PIPELINE}/", views.pipeline_detail, name="detail"),
    path(f"{PIPELINE}/status", views.pipeline_detail, {"fragment": "status"}, name="detail_status"),
    path(f"{PIPELINE}/cancel", views.pipeline_cancel, name="cancel"),
]
