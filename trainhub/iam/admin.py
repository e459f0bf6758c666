from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import AbstractBaseUser

from trainhub.iam.forms import ThrottledAdminAuthenticationForm
from trainhub.iam.models import Membership, PosixIdentity, Project
from trainhub.iam.selectors import posix_account


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["project_id", "display_name", "number"]
    inlines = [MembershipInline]


class PosixIdentityInline(admin.StackedInline):
    model = PosixIdentity
    extra = 0
    max_num = 1


class PosixUserAdmin(UserAdmin):
    """Django's user pages with each user's uid and group on the Slurm clusters, settable."""

    list_display = [*UserAdmin.list_display, "uid", "group"]
    list_select_related = ["posix_identity"]
    inlines = [*UserAdmin.inlines, PosixIdentityInline]

    @admin.display(description="uid (gid)")
    def uid(self, user: AbstractBaseUser) -> str:
        account = posix_account(user=user)
        return f"{account.uid} ({account.gid})"

    @admin.display(description="group")
    def group(self, user: AbstractBaseUser) -> str:
        return posix_account(user=user).group


admin.site.unregister(get_user_model())
admin.site.register(get_user_model(), PosixUserAdmin)
admin.site.login_form = ThrottledAdminAuthenticationForm
