from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from trainhub.iam.models import Project
from trainhub.iam.selectors import projects_for_user
from trainhub.jobs.costs import prices, project_costs
from trainhub.resources.selectors import project_resource_costs
from trainhub.scheduling.forms import QuotaForm
from trainhub.scheduling.selectors import quota_rows_for_user
from trainhub.scheduling.services import quota_set
from trainhub.slurm.dashboard import project_costs as project_slurm_costs


@login_required
@require_http_methods(["GET", "POST"])
def quota_list(request):
    """Usage vs limit for every quota of the user's projects; platform admins (staff) edit limits."""
    form = QuotaForm(request.POST or None) if request.user.is_staff else None
    if request.method == "POST":
        if form is None:
            raise PermissionDenied("Only administrators can change quota limits.")
        if form.is_valid():
            data = form.cleaned_data
            quota_set(project=data["project"], location=data["location"], metric=data["metric"],
                      limit=data["limit"], actor=request.user.get_username())
            messages.success(request, f"{data['metric']} for {data['project']} in {data['location']} set to "
                                      f"{'unlimited' if data['limit'] is None else data['limit']}.")
            return redirect("scheduling:quotas")
    projects = Project.objects.all() if request.user.is_staff else projects_for_user(user=request.user)
    project_ids = list(projects.values_list("pk", flat=True))
    costs = project_costs(project_ids=project_ids, now=timezone.now())
    return render(request, "scheduling/quota_list.html", {
        "rows": quota_rows_for_user(user=request.user), "form": form, "costs": costs,
        "resource_costs": project_resource_costs(project_ids=project_ids, now=timezone.now()),
        "slurm_costs": project_slurm_costs(project_ids=project_ids, now=timezone.now()),
        "fee_percent": round(prices().management_fee_fraction * 100, 2),
    })
