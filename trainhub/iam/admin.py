from django.contrib import admin

from trainhub.iam.forms import ThrottledAdminAuthenticationForm
from trainhub.iam.models import Membership, Project


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["project_id", "display_name", "number"]
    inlines = [MembershipInline]


admin.site.login_form = ThrottledAdminAuthenticationForm
