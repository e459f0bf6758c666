import secrets

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models

from trainhub.iam.roles import ROLE_CHOICES, VIEWER

project_id_validator = RegexValidator(
    r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$|^[a-z][a-z0-9-]{0,28}[a-z0-9]$",
    "Project ids are lowercase letters, digits and hyphens, starting with a letter.",
)


class Project(models.Model):
    project_id = models.CharField(max_length=30, unique=True, validators=[project_id_validator])
    display_name = models.CharField(max_length=128, blank=True)
    #: Vertex exposes the project *number* to replicas as CLOUD_ML_PROJECT_ID.
    number = models.BigIntegerField(unique=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project_id"]

    def __str__(self) -> str:
        return self.project_id


class Membership(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=ROLE_CHOICES, default=VIEWER)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "user"], name="one_membership_per_user_project")]

    def __str__(self) -> str:
        return f"{self.user} is {self.role} of {self.project}"


def new_token_key() -> str:
    return "th_" + secrets.token_urlsafe(32)


class ApiToken(models.Model):
    """The bearer token a user's API clients and CLI send. One per user; rotate to revoke."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_token")
    key = models.CharField(max_length=64, unique=True, default=new_token_key)
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)
