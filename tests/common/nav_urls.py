"""A URL conf in which stand-in tuning and pipeline pages replace the real ones (for the navigation
tests): the real URL conf without the tuning, pipeline, resources and Slurm pages."""

from django.http import HttpResponse
from django.urls import URLResolver, include, path

from trainhub.urls import urlpatterns as real_patterns


def page(request, **kwargs):
    return HttpResponse("tuning page")


tuning_patterns = ([
    path("", page, name="list"),
    path("studies/<int:pk>/", page, name="study"),
], "tuning")
pipeline_patterns = ([
    path("", page, name="list"),
    path("<int:pk>/", page, name="pipeline"),
], "pipelines")

LEFT_OUT = {"tuning", "pipelines", "resources", "slurm"}
urlpatterns = [path("tuning/", include(tuning_patterns)), path("pipelines/", include(pipeline_patterns)),
               *(p for p in real_patterns if not (isinstance(p, URLResolver) and p.namespace in LEFT_OUT))]
