import datetime as dt
import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from trainhub.common.sealing import seal
from trainhub.iam.models import ApiToken, Membership, PosixIdentity, Project, RegistryCredential
from trainhub.iam.roles import PERMISSIONS_BY_ROLE
from trainhub.iam.tokens import token_new


@transaction.atomic
def project_create(*, project_id: str, display_name: str = "") -> Project:
    project = Project(project_id=project_id, display_name=display_name or project_id,
                      number=secrets.randbelow(10**12 - 10**11) + 10**11)
    project.full_clean()
    project.save()
    return project


@transaction.atomic
def membership_set(*, project: Project, user: AbstractBaseUser, role: str) -> Membership:
    if role not in PERMISSIONS_BY_ROLE:
        raise ValueError(f"unknown role {role!r}")
    membership, _ = Membership.objects.update_or_create(project=project, user=user, defaults={"role": role})
    return membership


@transaction.atomic
def api_token_get_or_create(*, user: AbstractBaseUser) -> ApiToken:
    """The user's token; a new one if they have none, whose raw value is then ``token.key``
    (an existing token's ``key`` is None: only its digest is kept)."""
    token = ApiToken.objects.filter(user=user).first()
    return token if token is not None else api_token_rotate(user=user)


@transaction.atomic
def api_token_rotate(*, user: AbstractBaseUser) -> ApiToken:
    """A new token for the user, replacing any other (which stops working at once); its raw
    value is ``token.key``, on this instance only."""
    raw, digest = token_new()
    token, _ = ApiToken.objects.update_or_create(user=user, defaults={"digest": digest, "last_used": None})
    token.key = raw
    return token


#: How stale ``ApiToken.last_used`` may get: writing it on every request would cost each one an UPDATE.
LAST_USED_RESOLUTION_SECONDS = 60


def api_token_used(*, token: ApiToken, now: dt.datetime) -> None:
    """Record that the token authenticated a request, at most once a minute."""
    if token.last_used is None or (now - token.last_used).total_seconds() > LAST_USED_RESOLUTION_SECONDS:
        ApiToken.objects.filter(pk=token.pk).update(last_used=now)
        token.last_used = now


@transaction.atomic
def user_ensure(*, username: str, password: str, is_staff: bool = False) -> AbstractBaseUser:
    user_model = get_user_model()
    user, created = user_model.objects.get_or_create(username=username, defaults={"is_staff": is_staff})
    if created:
        user.set_password(password)
        user.save()
    return user


@transaction.atomic
def posix_identity_set(*, user: AbstractBaseUser, uid: int, gid: int | None = None, group: str = "") -> PosixIdentity:
    """Set or change the user's uid on the clusters, their group ``gid`` (default: ``uid``) named ``group``
    (default: theirs); raises django's ValidationError for a uid another user has or one of the defaults'.
    Jobs already submitted keep the ids they were submitted with."""
    identity = PosixIdentity.objects.filter(user=user).first() or PosixIdentity(user=user)
    identity.uid, identity.gid, identity.group = uid, uid if gid is None else gid, group
    identity.full_clean()
    identity.save()
    return identity


def registry_credential_set(*, project: Project, registry: str, username: str, password: str, actor: str,
                            now: dt.datetime) -> RegistryCredential:
    """Set how ``project``'s replicas log in to ``registry``; the password is stored sealed."""
    credential, _ = RegistryCredential.objects.update_or_create(
        project=project, registry=registry,
        defaults={"username": username, "sealed_password": seal(password), "updated_by": actor[:150],
                  "updated_at": now})
    return credential


def registry_credential_delete(*, project: Project, registry: str) -> int:
    return RegistryCredential.objects.filter(project=project, registry=registry).delete()[0]
