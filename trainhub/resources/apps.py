from django.apps import AppConfig


class ResourcesConfig(AppConfig):
    name = "trainhub.resources"
    label = "resources"
    verbose_name = "Persistent resources"
