from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    name = "trainhub.scheduling"
    label = "scheduling"
    verbose_name = "Scheduler"

    def ready(self) -> None:
        """Load the project's Celery app (trainhub.celery), so that the @shared_task functions of
        every app bind to it in any Django process. trainhub/__init__.py no longer imports it, to
        keep the CLI's and the agent's start-up free of Celery."""
        import trainhub.celery  # noqa: F401 - imported for its side effect: the app becomes current
