"""Time series behind the dashboards, written by services.samples_record.

A raw sample (``resolution`` 1) is one minute of one scope. Complete 15-minute and hourly blocks
are rolled up into one row each (``resolution`` 15 and 60) so that a day or a week is read as a
few hundred rows. Every row holds sums over its ``minutes`` sampled minutes: levels (GPUs
allocated, jobs waiting) are averaged by dividing by the minutes, flows (jobs started or ended,
how long the started ones waited) add up, and the "highest" columns keep their worst minute.
"""

from django.db import models

RESOLUTIONS = (1, 15, 60)


class Sample(models.Model):
    minute = models.PositiveBigIntegerField(help_text="Unix time // 60 of the first minute covered")
    #: Minutes covered: 1 for a raw sample, 15 or 60 for a rollup.
    resolution = models.PositiveSmallIntegerField(default=1)
    #: Minutes actually sampled within them (the sampler may have missed some).
    minutes = models.PositiveSmallIntegerField(default=1)

    class Meta:
        abstract = True


class CapacitySample(Sample):
    """GPUs of one scope: a node pool, or whatever a registered capacity source reports (a Slurm
    cluster: see dashboards.sources). Sums over the minutes sampled."""

    #: "pool" for node pools; another source's own word ("cluster") for what it reports.
    source = models.CharField(max_length=16)
    scope = models.CharField(max_length=96)
    accelerator_type = models.CharField(max_length=32)
    #: GPUs of nodes that are not down (draining nodes still run their jobs).
    gpus_total = models.PositiveIntegerField()
    #: GPUs of nodes a job (replica) occupies.
    gpus_allocated = models.PositiveIntegerField()
    #: GPUs of nodes dedicated to one owner (a persistent resource, a Slurm cluster).
    gpus_dedicated = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["resolution", "minute", "source", "scope", "accelerator_type"],
                                               name="one_capacity_sample_per_scope")]

    def __str__(self) -> str:
        return f"{self.minute} {self.source}/{self.scope}: {self.gpus_allocated}/{self.gpus_total}"


class QueueSample(Sample):
    """The serverless queue for one GPU type (NO_ACCELERATOR: CPU-only jobs).

    A raw row is written for every type with any job activity, and for CPU-only jobs always, so
    that the CPU-only rows count the minutes sampled (charts average levels over them).
    """

    accelerator_type = models.CharField(max_length=32)
    queued_jobs = models.PositiveIntegerField(default=0)
    pending_jobs = models.PositiveIntegerField(default=0)
    running_jobs = models.PositiveIntegerField(default=0)
    waiting_gpus = models.PositiveIntegerField(default=0)
    running_gpus = models.PositiveIntegerField(default=0)
    #: Age of the oldest waiting job (highest).
    oldest_wait_seconds = models.PositiveIntegerField(default=0)
    # Jobs that started since the previous sample, and how long they waited (create -> start).
    started_jobs = models.PositiveIntegerField(default=0)
    started_wait_seconds = models.PositiveBigIntegerField(default=0)
    #: The 90th percentile of those waits (highest).
    wait_p90_seconds = models.PositiveIntegerField(default=0)
    waited_under_1m = models.PositiveIntegerField(default=0)
    waited_1_10m = models.PositiveIntegerField(default=0)
    waited_10_60m = models.PositiveIntegerField(default=0)
    waited_1_6h = models.PositiveIntegerField(default=0)
    waited_over_6h = models.PositiveIntegerField(default=0)
    # Jobs that ended since the previous sample, by final state.
    ended_succeeded = models.PositiveIntegerField(default=0)
    ended_failed = models.PositiveIntegerField(default=0)
    ended_cancelled = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["resolution", "minute", "accelerator_type"],
                                               name="one_queue_sample_per_type")]

    def __str__(self) -> str:
        return f"{self.minute} {self.accelerator_type}: {self.queued_jobs + self.pending_jobs} waiting"
