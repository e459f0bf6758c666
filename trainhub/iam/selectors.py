"""Every project lookup goes through here and decides access at the same time.

A project the user is not a member of does not exist for them (404); a member without the
permission gets 403 naming the permission, as Google APIs do.
"""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import DEFAULT_DB_ALIAS
from django.db.models import QuerySet

from trainhub.common.compiled import CompiledQuery
from trainhub.common.errors import ApiError
from trainhub.iam.models import ApiToken, Membership, Project
from trainhub.iam.roles import role_grants


def projects_for_user(*, user: AbstractBaseUser) -> QuerySet[Project]:
    return Project.objects.filter(memberships__user=user).order_by("project_id")


def memberships_for_user(*, user: AbstractBaseUser) -> QuerySet[Membership]:
    return Membership.objects.filter(user=user).select_related("project").order_by("project__project_id")


def project_not_found(project_id: str) -> ApiError:
    return ApiError(404, f"Project {project_id!r} was not found or you are not a member of it.")


def _field_names(model) -> list[str]:
    return [field.attname for field in model._meta.concrete_fields]


# Every API request runs these two lookups: compiled once (see trainhub.common.compiled).
_MEMBERSHIP = CompiledQuery(
    lambda user_pk, project_id: Membership.objects.filter(user_id=user_pk, project__project_id=project_id)
    .values_list("role", *(f"project__{name}" for name in _field_names(Project)))[:1],
    -1, "\x00project")
_TOKEN = CompiledQuery(
    lambda key: ApiToken.objects.filter(key=key)
    .values_list(*_field_names(ApiToken), *(f"user__{name}" for name in _field_names(get_user_model())))[:1],
    "\x00key")


def api_token_get(*, key: str) -> ApiToken | None:
    """The token with this key and its user (``token.user``, read in the same query), or None."""
    rows = _TOKEN.rows(key)
    if not rows:
        return None
    token_fields, user_fields = _field_names(ApiToken), _field_names(get_user_model())
    token = ApiToken.from_db(DEFAULT_DB_ALIAS, token_fields, rows[0][: len(token_fields)])
    token.user = get_user_model().from_db(DEFAULT_DB_ALIAS, user_fields, rows[0][len(token_fields):])
    return token


def project_get_for_user(*, user: AbstractBaseUser, project_id: str, permission: str) -> Project:
    """The project, if the user holds ``permission`` in it; otherwise 404 or 403."""
    rows = _MEMBERSHIP.rows(user.pk, project_id) if user.is_authenticated else []
    if not rows:
        raise project_not_found(project_id)
    role = rows[0][0]
    if not role_grants(role, permission):
        raise ApiError(403, f"Permission '{permission}' denied on resource 'projects/{project_id}' "
                            f"(your role is {role}).")
    return Project.from_db(DEFAULT_DB_ALIAS, _field_names(Project), rows[0][1:])


def user_has_permission(*, user: AbstractBaseUser, project: Project, permission: str) -> bool:
    membership = Membership.objects.filter(user=user, project=project).only("role").first()
    return membership is not None and role_grants(membership.role, permission)

def projects_with_permission(*, user: AbstractBaseUser, permission: str) -> list[Project]:
    """The user's projects in which their role grants ``permission``, by project id."""
    return [m.project for m in memberships_for_user(user=user) if role_grants(m.role, permission)]


def api_token_for_user(*, user: AbstractBaseUser) -> ApiToken | None:
    return ApiToken.objects.filter(user=user).first()
