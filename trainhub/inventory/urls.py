from django.urls import path

from trainhub.inventory import views

app_name = "inventory"

urlpatterns = [
    path("", views.node_list, name="list"),
    path("pools", views.node_list, {"fragment": "pools"}, name="list_pools"),
    path("reservations", views.node_list, {"fragment": "reservations"}, name="list_reservations"),
    path("rows", views.node_list, {"fragment": "nodes"}, name="list_rows"),
    path("machines", views.machines, name="machines"),
]
