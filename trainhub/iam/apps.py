from django.apps import AppConfig


class IamConfig(AppConfig):
    name = "trainhub.iam"
    label = "iam"
    verbose_name = "Projects and access"
