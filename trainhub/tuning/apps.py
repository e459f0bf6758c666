from django.apps import AppConfig


def _tell_owner(sender, job, state, **kwargs) -> None:
    """A job a tuning job or pipeline submitted changed state: advance its owner in a task."""
    if job.owner:
        from trainhub.tuning.tasks import owned_job_changed

        owned_job_changed.delay(job.pk)


class TuningConfig(AppConfig):
    name = "trainhub.tuning"
    label = "tuning"
    verbose_name = "Tuning and pipelines"

    def ready(self) -> None:
        from trainhub.jobs.signals import job_state_changed

        job_state_changed.connect(_tell_owner, dispatch_uid="tuning-owned-job-changed")
