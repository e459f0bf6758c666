from django.apps import AppConfig


class TuningConfig(AppConfig):
    name = "trainhub.tuning"
    label = "tuning"
    verbose_name = "Tuning and pipelines"
