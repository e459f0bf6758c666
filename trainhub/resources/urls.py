from django.urls import path

from trainhub.resources import views

app_name = "resources"

LOCATION = "projects/<str:project>/locations/<str:location>/persistent-resources"
RESOURCE = f"{LOCATION}/<str:resource_id>"

urlpatterns = [
    path("persistent-resources/", views.resource_list, name="list"),
    path("persistent-resources/rows", views.resource_list, {"fragment": "rows"}, name="list_rows"),
    path("persistent-resources/new", views.resource_create_in_first_project, name="create_default"),
    path(f"{LOCATION}/new", views.resource_create, name="create"),
    path(f"{RESOURCE}/", views.resource_detail, name="detail"),
    path(f"{RESOURCE}/status", views.resource_detail, {"fragment": "status"}, name="detail_status"),
    path(f"{RESOURCE}/chart", views.resource_detail, {"fragment": "chart"}, name="detail_chart"),
    path(f"{RESOURCE}/resize", views.resource_resize, name="resize"),
    path(f"{RESOURCE}/reboot", views.resource_reboot, name="reboot"),
    path(f"{RESOURCE}/delete", views.resource_delete, name="delete"),
]
