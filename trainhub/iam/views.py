"""The API token page: see, create and rotate the bearer token the CLI and API clients send."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from trainhub.iam.selectors import api_token_for_user, projects_with_permission
from trainhub.iam.services import api_token_get_or_create, api_token_rotate

EXAMPLE_LOCATION = "us-central1"


@never_cache  # the page shows a secret
@login_required
def token(request: HttpRequest) -> HttpResponse:
    projects = projects_with_permission(user=request.user, permission="aiplatform.customJobs.list")
    return render(request, "iam/token.html", {
        "token": api_token_for_user(user=request.user),
        "server_url": request.build_absolute_uri("/").rstrip("/"),
        "example_project": projects[0].project_id if projects else "PROJECT",
        "example_location": EXAMPLE_LOCATION,
    })


@require_POST
@login_required
def token_create(request: HttpRequest) -> HttpResponse:
    api_token_get_or_create(user=request.user)
    messages.success(request, "Your API token was created.")
    return redirect("iam:token")


@require_POST
@login_required
def token_rotate(request: HttpRequest) -> HttpResponse:
    api_token_rotate(user=request.user)
    messages.success(request, "Your API token was rotated; the previous one no longer works.")
    return redirect("iam:token")
