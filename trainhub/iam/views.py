"""The API token page: create and rotate the bearer token the CLI and API clients send.

Only the token's digest is stored: the raw token is shown once, on the page the create or rotate
POST redirects to (it waits in the session, taken out by that one page view)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from trainhub.iam.selectors import api_token_for_user, projects_with_permission
from trainhub.iam.services import api_token_get_or_create, api_token_rotate

EXAMPLE_LOCATION = "us-central1"
#: Where a just-made raw token waits, in the session, for the one page view that shows it.
_SHOW_ONCE = "trainhub_api_token_once"


@never_cache  # the page shows a secret
@login_required
def token(request: HttpRequest) -> HttpResponse:
    projects = projects_with_permission(user=request.user, permission="aiplatform.customJobs.list")
    return render(request, "iam/token.html", {
        "token": api_token_for_user(user=request.user),
        "raw_token": request.session.pop(_SHOW_ONCE, None),
        "server_url": request.build_absolute_uri("/").rstrip("/"),
        "example_project": projects[0].project_id if projects else "PROJECT",
        "example_location": EXAMPLE_LOCATION,
    })


@require_POST
@login_required
def token_create(request: HttpRequest) -> HttpResponse:
    token = api_token_get_or_create(user=request.user)
    if token.key:
        request.session[_SHOW_ONCE] = token.key
    messages.success(request, "Your API token was created.")
    return redirect("iam:token")


@require_POST
@login_required
def token_rotate(request: HttpRequest) -> HttpResponse:
    request.session[_SHOW_ONCE] = api_token_rotate(user=request.user).key
    messages.success(request, "Your API token was rotated; the previous one no longer works.")
    return redirect("iam:token")
