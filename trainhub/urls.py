from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import JsonResponse
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from trainhub.iam import registry_api
from trainhub.iam.api import Me, TokenObtain
from trainhub.iam.forms import ThrottledAuthenticationForm
from trainhub.jobs import api as jobs_api
from trainhub.scheduling.api import SchedulerStatus

handler400 = "trainhub.common.pages.bad_request"

JOB = "v1/projects/<str:project>/locations/<str:location>/customJobs/<str:job_id>"


def healthz(request):
    return JsonResponse({"status": "ok"})


api_patterns = [
    path(f"{JOB}:cancel", jobs_api.CustomJobCancel.as_view(), name="customjob-cancel"),
    path(f"{JOB}/logs", jobs_api.CustomJobLogs.as_view(), name="customjob-logs"),
    path(JOB, jobs_api.CustomJobDetail.as_view(), name="customjob-detail"),
    path("v1/projects/<str:project>/locations/<str:location>/customJobs", jobs_api.CustomJobCollection.as_view(),
         name="customjob-collection"),
    path("", include("trainhub.resources.api_urls")),
    path("auth/token", TokenObtain.as_view(), name="auth-token"),
    path("v1/me", Me.as_view(), name="me"),
    path("v1/scheduler:status", SchedulerStatus.as_view(), name="scheduler-status"),
    path("", include("trainhub.tuning.api_urls")),
    path("", include("trainhub.slurm.api.urls")),
    path("", include("trainhub.inventory.agent_urls")),
    path("", include("trainhub.inventory.api_urls")),
    path("v1/projects/<str:project>/registryCredentials", registry_api.RegistryCredentials.as_view(),
         name="registry-credentials"),
    path("v1/projects/<str:project>/registryCredentials/<str:registry>",
         registry_api.RegistryCredentialDetail.as_view(), name="registry-credential"),
]

urlpatterns = [
    *api_patterns,
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    path("healthz", healthz, name="healthz"),
    path("login/", auth_views.LoginView.as_view(authentication_form=ThrottledAuthenticationForm), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("account/", include("trainhub.iam.urls")),
    path("nodes/", include("trainhub.inventory.urls")),
    path("quotas/", include("trainhub.scheduling.urls")),
    path("", include("trainhub.tuning.urls")),
    path("", include("trainhub.tuning.pipeline_urls")),
    path("", include("trainhub.resources.urls")),
    path("slurm/", include("trainhub.slurm.urls")),
    path("dashboards/", include("trainhub.dashboards.urls")),
    path("", include("trainhub.jobs.urls")),
]
