from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "trainhub.jobs"
    label = "jobs"
    verbose_name = "Training jobs"
