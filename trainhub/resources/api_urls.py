from django.urls import path

from trainhub.resources import api

LOCATION = "v1/projects/<str:project>/locations/<str:location>"
RESOURCE = f"{LOCATION}/persistentResources/<str:resource_id>"

urlpatterns = [
    path(f"{RESOURCE}:reboot", api.PersistentResourceReboot.as_view(), name="persistentresource-reboot"),
    path(f"{RESOURCE}/operations/<str:operation_id>", api.ResourceOperationDetail.as_view(),
         name="persistentresource-operation"),
    path(RESOURCE, api.PersistentResourceDetail.as_view(), name="persistentresource-detail"),
    path(f"{LOCATION}/persistentResources", api.PersistentResourceCollection.as_view(),
         name="persistentresource-collection"),
    path(f"{LOCATION}/operations/<str:operation_id>", api.LocationOperationDetail.as_view(), name="operation-detail"),
]
