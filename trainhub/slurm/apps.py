from django.apps import AppConfig


class SlurmConfig(AppConfig):
    name = "trainhub.slurm"
    label = "slurm"
    verbose_name = "Slurm clusters"
