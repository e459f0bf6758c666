"""Job pages: the submission form, a job's detail (state, reason, runs, nodes, timeline, output)
and its actions (scancel, hold, release) for its owner and the cluster's administrators."""

from __future__ import annotations

from functools import partial

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from trainhub.common.errors import ApiError
from trainhub.common.pages import html_page, render_page_or_fragment
from trainhub.slurm import selectors
from trainhub.slurm.dashboard import job_cost, job_gpus
from trainhub.slurm.forms.jobs import SubmitForm
from trainhub.slurm.models import JobState, SlurmJob
from trainhub.slurm.services import jobs as services
from trainhub.slurm.views.common import cluster_context, cluster_for, job_url

CREATE = "aiplatform.slurmJobs.create"
GET = "aiplatform.slurmJobs.get"
ACTIONS = {"cancel": (services.job_cancel, "aiplatform.slurmJobs.cancel", "Cancel requested"),
           "hold": (services.job_hold, "aiplatform.slurmJobs.update", "Held"),
           "release": (services.job_release, "aiplatform.slurmJobs.update", "Released")}
LOG_LINES = 500


@html_page
def job_submit(request: HttpRequest, project: str, location: str, cluster: str) -> HttpResponse:
    cluster_obj = cluster_for(request, project, location, cluster, CREATE)
    partitions = [p.name for p in selectors.cluster_partitions(cluster=cluster_obj)]
    form = SubmitForm(request.POST or None, partitions=partitions)
    if request.method == "POST" and form.is_valid():
        submission = services.Submission(argv=tuple(form.sbatch_args()), script=form.script_text())
        try:
            job = services.job_submit(cluster=cluster_obj, user=request.user, submission=submission,
                                      is_admin=selectors.is_cluster_admin(user=request.user, cluster=cluster_obj))
        except ApiError as error:
            form.show_service_error(error)
        else:
            if job.pk is None:  # #SBATCH --test-only: nothing was queued; the estimate is the answer
                messages.info(request, services.will_run_message(job))
                return redirect(request.path)
            messages.success(request, services.submitted_message(job, submission))
            notice = selectors.simulated_notice(cluster=cluster_obj)
            if notice:
                messages.warning(request, notice)
            return redirect(job_url(cluster_obj, job.job_id))
    return render(request, "slurm/job_submit.html", {**cluster_context(request, cluster_obj, "submit"), "form": form})


def _job_for(request: HttpRequest, project: str, location: str, cluster: str, slurm_job_id: str,
             permission: str = GET) -> SlurmJob:
    return selectors.job_get_for_user(user=request.user, project_id=project, location=location, cluster_id=cluster,
                                      job_id=slurm_job_id, permission=permission)


def _status_context(request: HttpRequest, job: SlurmJob) -> dict:
    admin = selectors.is_cluster_admin(user=request.user, cluster=job.cluster)
    mine = admin or job.user_name == request.user.get_username()
    gpu_type, gpus = job_gpus(job)
    return {"job": job, "runs": selectors.job_runs(job=job), "job_nodes": selectors.job_nodes(job=job),
            "cost": job_cost(job, (gpu_type, gpus), timezone.now()), "gpu_type": gpu_type, "gpus": gpus,
            "position": selectors.job_queue_position(job=job),
            "events": selectors.job_events(job=job),
            "can_cancel": mine and job.cancellable,
            "can_hold": mine and job.state == JobState.PENDING and not job.hold,
            "can_release": mine and job.state == JobState.PENDING and job.hold and (admin or job.hold == "user"),
            "urls": {name: job_url(job.cluster, job.job_id, name) for name in
                     ("job", "job_status", "job_log", "job_action", "job_priority")}}


def _log_context(request: HttpRequest, job: SlurmJob) -> dict:
    lines = list(job.log_lines.order_by("-id")[:LOG_LINES])[::-1]
    return {"job": job, "log_lines": lines, "log_limit": LOG_LINES,
            "urls": {"job_log": job_url(job.cluster, job.job_id, "job_log")}}


@html_page
def job_detail(request: HttpRequest, project: str, location: str, cluster: str, slurm_job_id: str,
               fragment: str | None = None) -> HttpResponse:
    job = _job_for(request, project, location, cluster, slurm_job_id)
    sections = {"status": ("slurm/_job_status.html", partial(_status_context, request, job)),
                "log": ("slurm/_job_log.html", partial(_log_context, request, job))}
    return render_page_or_fragment(request, "slurm/job_detail.html", sections, fragment,
                                   page_context=partial(cluster_context, request, job.cluster, "queue"))


@require_POST
@html_page
def job_action(request: HttpRequest, project: str, location: str, cluster: str, slurm_job_id: str) -> HttpResponse:
    job = _job_for(request, project, location, cluster, slurm_job_id)  # a stranger learns nothing, not even 400
    action = request.POST.get("action", "")
    if action not in ACTIONS:
        raise ApiError(400, f"unknown action {action!r}")
    service, permission, done = ACTIONS[action]
    job = _job_for(request, project, location, cluster, slurm_job_id, permission)
    try:
        service(job=job, actor=request.user,
                is_admin=selectors.is_cluster_admin(user=request.user, cluster=job.cluster))
    except ApiError as error:
        if error.http_status != 400:
            raise
        messages.error(request, error.message)
    else:
        messages.success(request, f"{done}: job {job.job_id}.")
    return redirect(job_url(job.cluster, job.job_id))


