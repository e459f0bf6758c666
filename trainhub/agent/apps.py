from django.apps import AppConfig


class AgentConfig(AppConfig):
    name = "trainhub.agent"
    label = "agent"
    verbose_name = "Node agent"
