"""A URL conf in which the tuning app has landed (for the navigation tests)."""

from django.http import HttpResponse
from django.urls import include, path

from trainhub.urls import urlpatterns as real_patterns


def page(request, **kwargs):
    return HttpResponse("tuning page")


tuning_patterns = ([
    path("", page, name="list"),
    path("studies/<int:pk>/", page, name="study"),
    path("pipelines/", page, name="pipeline_list"),
    path("pipelines/<int:pk>/", page, name="pipeline"),
], "tuning")

urlpatterns = [path("tuning/", include(tuning_patterns)), *real_patterns]
