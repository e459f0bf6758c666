from django.urls import path

from trainhub.scheduling import views

app_name = "scheduling"

urlpatterns = [
    path("", views.quota_list, name="quotas"),
]
