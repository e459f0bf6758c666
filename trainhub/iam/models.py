from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

from trainhub.iam.roles import ROLE_CHOICES, VIEWER
from trainhub.iam.tokens import token_new

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
    """Migration 0001's default for the column it named ``key`` (tokens come from iam.tokens now)."""
    return token_new()[0]


class ApiToken(models.Model):
    """The bearer token a user's API clients and CLI send. One per user; rotate to revoke.

    Only the token's digest is stored (iam.tokens); the raw token is ``key`` on the instance that
    created it (services.api_token_rotate / api_token_get_or_create), shown once, None otherwise.
    """

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_token")
    digest = models.CharField(max_length=64, unique=True)
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)

    #: The raw token, on the instance that made it only.
    key: str | None = None


class RegistryCredential(models.Model):
    """How a project's replicas pull images from one registry (``registry.example.com:5000``).
    Set by administrators; the password is sealed (trainhub.common.sealing) and handed only to
    the agent of a node running that project's replica whose image is on that registry."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="registry_credentials")
    registry = models.CharField(max_length=253)
    username = models.CharField(max_length=255)
    sealed_password = models.TextField()
    updated_by = models.CharField(max_length=150)
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "registry"], name="one_credential_per_registry")]


#: The largest id PostgreSQL's integer column holds (Linux's uid_t goes to 2**32 - 2).
POSIX_ID_MAX = 2**31 - 1


class PosixIdentity(models.Model):
    """The Unix user a person is on every cluster, as NSS (LDAP, /etc/passwd) tells slurmctld a
    submitter's uid and gid: a Slurm job keeps its submitter's, shown as squeue's %U %G %g and
    scontrol show job's UserId=alice(1001) GroupId=alice(1001). Set by administrators; a user
    without one has selectors.posix_account's default. Explicit uids stay below
    TRAINHUB_USER_UID_BASE, where no default is, so two users never share one."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True,
                                related_name="posix_identity")
    uid = models.PositiveIntegerField(unique=True, validators=[MinValueValidator(1), MaxValueValidator(POSIX_ID_MAX)],
                                      error_messages={"unique": "Another user has this uid."})
    gid = models.PositiveIntegerField(validators=[MinValueValidator(1), MaxValueValidator(POSIX_ID_MAX)])
    #: The group's name (squeue's %g); empty: the user's name (useradd's user private group).
    group = models.CharField(max_length=32, blank=True)

    class Meta:
        verbose_name = "POSIX identity"
        verbose_name_plural = "POSIX identity"

    def clean(self) -> None:
        base = settings.TRAINHUB_USER_UID_BASE
        if self.uid is not None and self.uid >= base:
            raise ValidationError({"uid": f"Set a uid below {base}: from {base} on, uids are trainhub's "
                                          f"defaults ({base} + the user's number)."})
