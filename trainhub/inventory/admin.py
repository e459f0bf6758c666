from django.contrib import admin

from trainhub.inventory.models import Node, NodePool


@admin.register(NodePool)
class NodePoolAdmin(admin.ModelAdmin):
    list_display = ["name", "location", "machine_type", "accelerator_type", "accelerator_count", "executor"]


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ["name", "pool", "state", "last_heartbeat"]
    list_filter = ["state", "pool"]
