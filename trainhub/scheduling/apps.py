from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    name = "trainhub.scheduling"
    label = "scheduling"
    verbose_name = "Scheduler"
