from rest_framework.permissions import BasePermission


class IsPlatformAdmin(BasePermission):
    """Platform administrators (is_staff) only: machines, registry credentials."""

    message = "This is for platform administrators."

    def has_permission(self, request, view) -> bool:
        return bool(request.user and request.user.is_authenticated and request.user.is_staff)
