from django.urls import path

from trainhub.jobs import views

app_name = "jobs"

urlpatterns = [
    path("", views.job_list, name="list"),
]
