from django.apps import AppConfig


class DashboardsConfig(AppConfig):
    name = "trainhub.dashboards"
    label = "dashboards"
    verbose_name = "Dashboards"
