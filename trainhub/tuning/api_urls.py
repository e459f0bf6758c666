"""REST routes of the tuning app, included at the root by trainhub.urls."""

from django.urls import path

from trainhub.tuning.api import MODELS, PIPELINES, TUNING_JOBS, ModelVersions, views_for

LOCATION = "v1/projects/<str:project>/locations/<str:location>"

urlpatterns = []
for collection in (TUNING_JOBS, PIPELINES, MODELS):
    listing, detail, cancel = views_for(collection)
    base = f"{LOCATION}/{collection.key}"
    urlpatterns += [
        path(f"{base}/<str:resource_id>:listVersions", ModelVersions.as_view(), name="model-versions")
        if collection is MODELS else
        path(f"{base}/<str:resource_id>:cancel", cancel, name=f"{collection.key}-cancel"),
        path(f"{base}/<str:resource_id>", detail, name=f"{collection.key}-detail"),
        path(base, listing, name=f"{collection.key}-collection"),
    ]
