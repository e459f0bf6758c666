from django.apps import AppConfig


class InventoryConfig(AppConfig):
    name = "trainhub.inventory"
    label = "inventory"
    verbose_name = "Node pools and nodes"
