"""REST routes of the tuning app, included at the root by trainhub.urls."""

from django.urls import path

from trainhub.tuning.api import MODELS, PIPELINES, TUNING_JOBS, ModelVersions, views_for

LOCATION = "v1/projects/<str:project>/locations/<str:location>"

urlpatterns = []
for collection in (TUNING_JOBS, PIPELINES, MODELS):
    listing, detail, cancel = views_for(collection)
    base = f"{LOCATION}/{collection.key}"
    one = f"{base}/<str:{collection.id_param}>"
    urlpatterns += [
        path(f"{one}:listVersions", ModelVersions.as_view(), name="model-versions")
        if collection is MODELS else
        path(f"{one}:cancel", cancel, name=f"{collection.key}-cancel"),
        path(one, detail, name=f"{collection.key}-detail"),
        path(base, listing, name=f"{collection.key}-collection"),
    ]
