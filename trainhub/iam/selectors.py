"""Every project lookup goes through here and decides access at the same time.

A project the user is not a member of does not exist for them (404); a member without the
permission gets 403 naming the permission, as Google APIs do.
"""

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from trainhub.common.errors import ApiError
from trainhub.iam.models import ApiToken, Membership, Project
from trainhub.iam.roles import role_grants


def projects_for_user(*, user: AbstractBaseUser) -> QuerySet[Project]:
    return Project.objects.filter(memberships__user=user).order_by("project_id")


def memberships_for_user(*, user: AbstractBaseUser) -> QuerySet[Membership]:
    return Membership.objects.filter(user=user).select_related("project").order_by("project__project_id")


def project_not_found(project_id: str) -> ApiError:
    return ApiError(404, f"Project {project_id!r} was not found or you are not a member of it.")


def project_get_for_user(*, user: AbstractBaseUser, project_id: str, permission: str) -> Project:
    """The project, if the user holds ``permission`` in it; otherwise 404 or 403."""
    membership = (
        Membership.objects.select_related("project")
        .filter(user=user, project__project_id=project_id)
        .first()
        if user.is_authenticated
        else None
    )
    if membership is None:
        raise project_not_found(project_id)
    if not role_grants(membership.role, permission):
        raise ApiError(403, f"Permission '{permission}' denied on resource 'projects/{project_id}' "
                            f"(your role is {membership.role}).")
    return membership.project


def user_has_permission(*, user: AbstractBaseUser, project: Project, permission: str) -> bool:
    membership = Membership.objects.filter(user=user, project=project).only("role").first()
    return membership is not None and role_grants(membership.role, permission)

def projects_with_permission(*, user: AbstractBaseUser, permission: str) -> list[Project]:
    """The user's projects in which their role grants ``permission``, by project id."""
    return [m.project for m in memberships_for_user(user=user) if role_grants(m.role, permission)]


def api_token_for_user(*, user: AbstractBaseUser) -> ApiToken | None:
    return ApiToken.objects.filter(user=user).first()
