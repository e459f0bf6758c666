from django.core.validators import MinValueValidator
from django.db import models

from trainhub.iam.models import Project


class Quota(models.Model):
    """A GPU quota limit of one project in one region; no row means unlimited."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="quotas")
    location = models.CharField(max_length=32)
    metric = models.CharField(max_length=96)
    limit = models.PositiveIntegerField(validators=[MinValueValidator(0)])
    updated = models.DateTimeField(auto_now=True)
    updated_by = models.CharField(max_length=150, blank=True)

    class Meta:
        ordering = ["project_id", "location", "metric"]
        constraints = [models.UniqueConstraint(fields=["project", "location", "metric"], name="one_quota_per_metric")]

    def __str__(self) -> str:
        return f"{self.project}/{self.location}/{self.metric}={self.limit}"
