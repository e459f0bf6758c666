from django.apps import AppConfig


class DashboardsConfig(AppConfig):
    name = "trainhub.dashboards"
    label = "dashboards"
    verbose_name = "Dashboards"

    def ready(self) -> None:
        from trainhub.dashboards.sources import node_pool_capacity, register_capacity_source

        register_capacity_source(node_pool_capacity)
