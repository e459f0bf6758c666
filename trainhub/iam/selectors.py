"""Every project lookup goes through here and decides access at the same time.

A project the user is not a member of does not exist for them (404); a member without the
permission gets 403 naming the permission, as Google APIs do.
"""

from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from trainhub.common.compiled import CompiledQuery, field_names, instances
from trainhub.common.errors import ApiError
from trainhub.common.sealing import unseal
from trainhub.iam.models import ApiToken, Membership, PosixIdentity, Project, RegistryCredential
from trainhub.iam.roles import role_grants
from trainhub.iam.tokens import token_digest


def projects_for_user(*, user: AbstractBaseUser) -> QuerySet[Project]:
    return Project.objects.filter(memberships__user=user).order_by("project_id")


def memberships_for_user(*, user: AbstractBaseUser) -> QuerySet[Membership]:
    return Membership.objects.filter(user=user).select_related("project").order_by("project__project_id")


def project_not_found(project_id: str) -> ApiError:
    return ApiError(404, f"Project {project_id!r} was not found or you are not a member of it.")


#: A user's POSIX identity columns, read with their token (posix_account needs no query of its own).
_POSIX_COLUMNS = ("user__posix_identity__uid", "user__posix_identity__gid", "user__posix_identity__group")

# Every API request runs these lookups: compiled once (see trainhub.common.compiled).
_MEMBERSHIP = CompiledQuery(
    lambda user_pk, project_id: Membership.objects.filter(user_id=user_pk, project__project_id=project_id)
    .values_list("role", *(f"project__{name}" for name in field_names(Project)))[:1],
    -1, "\x00project")
_TOKEN = CompiledQuery(
    lambda key: ApiToken.objects.filter(digest=key)
    .values_list(*field_names(ApiToken), *(f"user__{name}" for name in field_names(get_user_model())),
                 *_POSIX_COLUMNS)[:1],
    "\x00key")
_TOKEN_WITH_MEMBERSHIP = CompiledQuery(
    lambda key, project_id: Membership.objects.filter(user__api_token__digest=key, project__project_id=project_id)
    .values_list("role", *(f"project__{name}" for name in field_names(Project)),
                 *(f"user__api_token__{name}" for name in field_names(ApiToken)),
                 *(f"user__{name}" for name in field_names(get_user_model())), *_POSIX_COLUMNS)[:1],
    "\x00key", "\x00project")

#: The attribute of a user object that holds the memberships read with its token, by project id:
#: (role, project), or None for a project the user is not a member of. A user object lives for one
#: request, as Django's ModelBackend relies on for its ``_perm_cache``.
_MEMBERSHIPS_READ = "_trainhub_memberships_read"
#: The attribute of a user object that holds their PosixAccount read with their token.
_POSIX_ACCOUNT_READ = "_trainhub_posix_account_read"


def api_token_get(*, key: str, project_id: str = "") -> ApiToken | None:
    """The token whose raw value is ``key`` (found by its digest) and its user (``token.user``,
    read in the same query), or None.

    With ``project_id`` - the project the request's path names - the user's membership of that
    project comes in the same query and stays on the user for ``project_get_for_user``: a request
    reads its token and its project in one statement. A key that is unknown, or whose user is
    not a member, takes a second query to tell the two apart (401 or 404). The user's POSIX identity
    comes in the same query too, for posix_account.
    """
    key = token_digest(key)
    if project_id:
        rows = _TOKEN_WITH_MEMBERSHIP.rows(key, project_id)
        if rows:
            project, token, token.user = instances(rows[0][1:], Project, ApiToken, get_user_model())
            setattr(token.user, _MEMBERSHIPS_READ, {project_id: (rows[0][0], project)})
            setattr(token.user, _POSIX_ACCOUNT_READ, _posix_account(token.user, *rows[0][-len(_POSIX_COLUMNS):]))
            return token
    rows = _TOKEN.rows(key)
    if not rows:
        return None
    token, token.user = instances(rows[0], ApiToken, get_user_model())
    setattr(token.user, _POSIX_ACCOUNT_READ, _posix_account(token.user, *rows[0][-len(_POSIX_COLUMNS):]))
    if project_id:
        setattr(token.user, _MEMBERSHIPS_READ, {project_id: None})
    return token


def project_get_for_user(*, user: AbstractBaseUser, project_id: str, permission: str) -> Project:
    """The project, if the user holds ``permission`` in it; otherwise 404 or 403."""
    memberships_read = getattr(user, _MEMBERSHIPS_READ, {})
    if project_id in memberships_read:
        membership = memberships_read[project_id]
    else:
        rows = _MEMBERSHIP.rows(user.pk, project_id) if user.is_authenticated else []
        membership = (rows[0][0], instances(rows[0][1:], Project)[0]) if rows else None
    if membership is None:
        raise project_not_found(project_id)
    role, project = membership
    if not role_grants(role, permission):
        raise ApiError(403, f"Permission '{permission}' denied on resource 'projects/{project_id}' "
                            f"(your role is {role}).")
    return project


def user_has_permission(*, user: AbstractBaseUser, project: Project, permission: str) -> bool:
    """Whether the user's role in ``project`` grants ``permission``; the membership read with the
    request's token (api_token_get) answers without a query."""
    memberships_read = getattr(user, _MEMBERSHIPS_READ, {})
    if project.project_id in memberships_read:
        membership = memberships_read[project.project_id]
        return membership is not None and role_grants(membership[0], permission)
    membership = Membership.objects.filter(user=user, project=project).only("role").first()
    return membership is not None and role_grants(membership.role, permission)

def projects_with_permission(*, user: AbstractBaseUser, permission: str) -> list[Project]:
    """The user's projects in which their role grants ``permission``, by project id."""
    return [m.project for m in memberships_for_user(user=user) if role_grants(m.role, permission)]


def api_token_for_user(*, user: AbstractBaseUser) -> ApiToken | None:
    return ApiToken.objects.filter(user=user).first()


def image_registry(image: str) -> str:
    """The registry an image reference names ("ghcr.io/a/b:1" -> "ghcr.io"); Docker Hub's otherwise."""
    first, _, rest = image.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return first
    return "docker.io"


def registry_login_for(*, project_pk: int, image: str) -> dict[str, str] | None:
    """The unsealed login of ``project``'s credential for ``image``'s registry, if an admin set one."""
    registry = image_registry(image)
    credential = RegistryCredential.objects.filter(project_id=project_pk, registry=registry).first()
    if credential is None:
        return None
    return {"registry": registry, "username": credential.username, "password": unseal(credential.sealed_password)}


@dataclass(frozen=True)
class PosixAccount:
    """A user's uid, gid and group name on the clusters (iam.PosixIdentity)."""

    uid: int
    gid: int
    group: str


def _posix_account(user: AbstractBaseUser, uid: int | None, gid: int | None, group: str | None) -> PosixAccount:
    """A PosixIdentity's ids (``uid`` None: the user has none), else the default: uid and gid
    TRAINHUB_USER_UID_BASE + the user's number, the group named after the user (useradd's user
    private group); an identity's empty group name is the user's too."""
    if uid is None or gid is None:
        uid = gid = settings.TRAINHUB_USER_UID_BASE + user.pk
    return PosixAccount(uid=uid, gid=gid, group=group or user.get_username())


def posix_account(*, user: AbstractBaseUser) -> PosixAccount:
    """The uid, gid and group a user's Slurm jobs show (as slurmctld keeps its submitter's); no
    query for a user read with their token (api_token_get) or with select_related("posix_identity")."""
    read = getattr(user, _POSIX_ACCOUNT_READ, None)
    if read is not None:
        return read
    identity: PosixIdentity | None = getattr(user, "posix_identity", None)
    if identity is None:
        return _posix_account(user, None, None, None)
    return _posix_account(user, identity.uid, identity.gid, identity.group)


def posix_accounts_by_username(*, usernames: list[str]) -> dict[str, PosixAccount]:
    """posix_account of each of these users that exists, by name."""
    users = get_user_model().objects.filter(username__in=usernames).select_related("posix_identity")
    return {user.get_username(): posix_account(user=user) for user in users}
