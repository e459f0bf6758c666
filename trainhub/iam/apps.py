from django.apps import AppConfig


class IamConfig(AppConfig):
    name = "trainhub.iam"
    label = "iam"
    verbose_name = "Projects and access"

    def ready(self) -> None:
        from trainhub.iam import schema  # noqa: F401 - registers the bearer scheme with drf-spectacular
