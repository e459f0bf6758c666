from django.urls import path

from trainhub.inventory import views

app_name = "inventory"

urlpatterns = [
    path("", views.node_list, name="list"),
]
