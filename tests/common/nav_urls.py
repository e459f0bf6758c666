"""A URL conf in which a tuning app with a pipelines page stands in for the real one (for the
navigation tests): the real URL conf without the tuning, resources and Slurm pages."""

from django.http import HttpResponse
from django.urls import URLResolver, include, path

from trainhub.urls import urlpatterns as real_patterns


def page(request, **kwargs):
    return HttpResponse("tuning page")


tuning_patterns = ([
    path("", page, name="list"),
    path("studies/<int:pk>/", page, name="study"),
    path("pipelines/", page, name="pipeline_list"),
    path("pipelines/<int:pk>/", page, name="pipeline"),
], "tuning")

LEFT_OUT = {"tuning", "resources", "slurm"}
urlpatterns = [path("tuning/", include(tuning_patterns)),
               *(p for p in real_patterns if not (isinstance(p, URLResolver) and p.namespace in LEFT_OUT))]
