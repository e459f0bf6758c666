"""The job pages: list, detail with its live fragments, cancel, and the submit form."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.conftest import container_pool, job_body
from trainhub.common.redis import get_redis
from trainhub.iam.roles import USER
from trainhub.iam.services import membership_set
from trainhub.inventory.services import node_pool_ensure
from trainhub.jobs import services, states
from trainhub.jobs.models import CustomJob
from trainhub.scheduling import working_memory

pytestmark = pytest.mark.django_db


def submit(project, user, *pools, name="job", now=None, **kwargs) -> CustomJob:
    body = job_body(*(pools or [container_pool()]), name=name, **kwargs)
    return services.job_submit(project=project, location="us-central1", user=user, body=body, now=now)


def job_url(job: CustomJob, name: str = "jobs:detail") -> str:
    return reverse(name, kwargs={"project": job.project.project_id, "location": job.location, "job_id": job.job_id})


def place_on(job: CustomJob, node, now) -> None:
    """Allocate the job's single replica (workerpool0-0) to ``node``, as a scheduler pass would."""
    assert services.jobs_place(assignments={job.pk: {(0, 0): (node.pk, [])}}, now=now) == {job.pk}


def create_url(project="alpha", location="us-central1") -> str:
    return reverse("jobs:create", kwargs={"project": project, "location": location})


def form_data(**overrides) -> dict:
    """A complete submit-form POST for one n1-standard-4 replica with a T4."""
    data = {
        "display_name": "from the form",
        "location": "us-central1",
        "strategy": "STANDARD",
        "timeout": "3600",
        "max_wait": "",
        "pool0-machine_type": "n1-standard-4",
        "pool0-accelerator_type": "NVIDIA_TESLA_T4",
        "pool0-accelerator_count": "1",
        "pool0-image_uri": "python:3.11",
        "pool0-command": "python3\n-c",
        "pool0-args": "\"print('hi')\"\n\n--flag=1\n",
        "pool0-env": "MODE=train\nURL=http://x/?a=b",
    }
    for index in (1, 2, 3):
        data[f"pool{index}-machine_type"] = ""
        data[f"pool{index}-replica_count"] = "1"
    data.update(overrides)
    return data


# Access -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, method", [
    ("jobs:list", "get"), ("jobs:list_rows", "get"), ("jobs:create_default", "get"), ("jobs:create", "get"),
    ("jobs:create", "post"), ("jobs:detail", "get"), ("jobs:detail_status", "get"), ("jobs:detail_logs", "get"),
    ("jobs:cancel", "post"),
])
def test_every_job_page_sends_anonymous_visitors_to_the_login_page(client, cast, name, method):
    job = submit(cast["alpha"], cast["uma"])
    kwargs = {"project": "alpha", "location": "us-central1", "job_id": job.job_id}
    if name == "jobs:create":
        kwargs.pop("job_id")
    elif name in ("jobs:list", "jobs:list_rows", "jobs:create_default"):
        kwargs = {}
    url = reverse(name, kwargs=kwargs)
    response = getattr(client, method)(url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login") + "?next=")


def test_the_detail_page_of_another_projects_job_is_404(client, cast):
    job = submit(cast["alpha"], cast["uma"])
    client.force_login(cast["mallory"])
    for name in ("jobs:detail", "jobs:detail_status", "jobs:detail_logs"):
        response = client.get(job_url(job, name))
        assert response.status_code == 404
        assert b"not a member" in response.content
    assert client.post(job_url(job, "jobs:cancel")).status_code == 404


def test_an_unknown_job_id_is_404_with_the_html_page(client, cast):
    client.force_login(cast["uma"])
    response = client.get(reverse("jobs:detail", kwargs={"project": "alpha", "location": "us-central1",
                                                         "job_id": "123"}))
    assert response.status_code == 404
    assert "404.html" in [t.name for t in response.templates]


# Job detail and its fragments ---------------------------------------------------------------

def test_the_detail_page_shows_the_spec_replicas_timeline_and_logs(client, cast, nodes, now):
    job = submit(cast["alpha"], cast["uma"], container_pool(command=["python3", "train.py"], args=["--lr", "0.1"],
                                                            accelerator="NVIDIA_TESLA_T4"), name="detailed")
    node = nodes["t4"].nodes.first()
    place_on(job, node, now)
    replica = job.replicas.get()
    services.replica_started(replica=replica, now=now)
    services.replica_logs_append(replica=replica, lines=[("stdout", now, "epoch 1 <done>"),
                                                         ("stderr", now, "warning: slow")])
    client.force_login(cast["vic"])
    response = client.get(job_url(job))
    content = response.content.decode()
    assert response.status_code == 200
    for text in ("detailed", "n1-standard-4", "python:3.11", "python3 train.py", "--lr", node.name,
                 "workerpool0-0", "Every replica is running.", "epoch 1 &lt;done&gt;", "log-line--stderr",
                 "badge--running", "1 × T4 <span"):  # the GPU by its name, its API word beside it
        assert text in content, text
    assert "Cancel job" not in content  # vic is a viewer


def test_a_failed_job_shows_its_error_and_a_waiting_job_its_wait_reasons(client, cast, now):
    waiting = submit(cast["alpha"], cast["uma"], name="waiting")
    working_memory.waits_write(get_redis(), {waiting.pk: working_memory.WaitExplanation(
        ["No free node of n1-standard-4."], 2, None, "")})
    failed = submit(cast["alpha"], cast["uma"], name="failed")
    services.job_fail(job=failed, now=now, code=services.CODE_INTERNAL, message="The node vanished.")
    client.force_login(cast["uma"])
    assert "No free node of n1-standard-4." in client.get(job_url(waiting)).content.decode()
    content = client.get(job_url(failed)).content.decode()
    assert "The node vanished." in content and "badge--failed" in content


def test_the_logs_fragment_returns_only_lines_after_the_given_id_and_one_task(client, cast, nodes, now):
    pools = (container_pool(), container_pool(replicas=1))
    job = submit(cast["alpha"], cast["uma"], *pools)
    first, second = nodes["t4"].nodes.all()[:2]
    assert services.jobs_place(assignments={job.pk: {(0, 0): (first.pk, []), (1, 0): (second.pk, [])}}, now=now)
    primary, worker = job.replicas.order_by("pool_index")
    services.replica_logs_append(replica=primary, lines=[("stdout", now, "old line")])
    seen = job.logs.get().pk
    services.replica_logs_append(replica=primary, lines=[("stdout", now, "primary new")])
    services.replica_logs_append(replica=worker, lines=[("stderr", now, "worker new")])
    client.force_login(cast["uma"])

    content = client.get(job_url(job, "jobs:detail_logs"), {"after": seen}).content.decode()
    assert "old line" not in content and "primary new" in content and "worker new" in content
    assert 'hx-swap-oob="true"' in content and 'hx-swap="beforeend"' in content
    assert f"after={job.logs.order_by('-pk').first().pk}" in content

    only_worker = client.get(job_url(job, "jobs:detail_logs"), {"after": seen, "task": "workerpool1-0"})
    assert "worker new" in only_worker.content.decode()
    assert "primary new" not in only_worker.content.decode()
    assert "task=workerpool1-0" in only_worker.content.decode()


@pytest.mark.parametrize("params", [{"after": "-1"}, {"after": "x"}, {"task": "workerpool9-9"}])
def test_bad_log_parameters_are_answered_without_polling_and_without_a_500(client, cast, params):
    job = submit(cast["alpha"], cast["uma"])
    client.force_login(cast["uma"])
    assert client.get(job_url(job), params).status_code == 200
    fragment = client.get(job_url(job, "jobs:detail_logs"), params)
    assert fragment.status_code == 200
    assert b"hx-trigger" not in fragment.content


def test_the_fragments_poll_while_the_job_is_live_and_stop_once_it_is_terminal(client, cast):
    job = submit(cast["alpha"], cast["uma"])
    client.force_login(cast["uma"])
    page = client.get(job_url(job)).content.decode()
    assert 'hx-trigger="th-changed from:body"' in page  # status: when the live version moves
    assert 'hx-trigger="th-tick from:body"' in page  # log tail: on every tick
    for name, trigger in (("jobs:detail_status", b"th-changed"), ("jobs:detail_logs", b"th-tick")):
        response = client.get(job_url(job, name))
        assert response.status_code == 200
        assert b'hx-trigger="' + trigger + b' from:body"' in response.content
        assert b"<html" not in response.content

    services.job_cancel(job=job)
    assert b"hx-trigger" not in client.get(job_url(job)).content
    for name in ("jobs:detail_status", "jobs:detail_logs"):
        response = client.get(job_url(job, name))
        assert response.status_code == 200
        assert b"hx-trigger" not in response.content
    assert b"CANCELLED" in client.get(job_url(job, "jobs:detail_status")).content


# Cancel -------------------------------------------------------------------------------------

def test_cancel_moves_a_queued_job_to_cancelled_and_returns_to_the_job(client, cast):
    job = submit(cast["alpha"], cast["uma"])
    client.force_login(cast["uma"])
    assert b"Cancel job" in client.get(job_url(job)).content
    response = client.post(job_url(job, "jobs:cancel"))
    assert response.status_code == 302 and response["Location"] == job_url(job)
    job.refresh_from_db()
    assert job.state == states.CANCELLED
    assert b"Cancel job" not in client.get(job_url(job)).content


def test_the_timeout_reads_in_days_and_hours_beside_the_specs_seconds(client, cast):
    job = submit(cast["alpha"], cast["uma"])  # the default timeout: 7 days
    client.force_login(cast["uma"])
    page = client.get(job_url(job)).content.decode()
    assert '<dt>Timeout</dt><dd>7d 00h <span class="muted mono">(604800s)</span></dd>' in page


def test_a_cancelling_job_offers_no_second_cancel(client, cast, nodes, now):
    job = submit(cast["alpha"], cast["uma"], now=now)
    place_on(job, nodes["t4"].nodes.first(), now)
    services.replica_started(replica=job.replicas.get(), now=now)
    services.job_cancel(job=job, now=now)
    job.refresh_from_db()
    assert job.state == states.CANCELLING  # its agent has yet to stop the replica
    client.force_login(cast["uma"])
    page = client.get(job_url(job)).content
    assert b"CANCELLING" in page and b"Cancel job" not in page


def test_a_viewer_gets_403_on_cancel_and_the_job_keeps_running(client, cast):
    job = submit(cast["alpha"], cast["uma"])
    client.force_login(cast["vic"])
    response = client.post(job_url(job, "jobs:cancel"))
    assert response.status_code == 403
    assert b"aiplatform.customJobs.cancel" in response.content
    job.refresh_from_db()
    assert job.state == states.QUEUED


def test_cancel_only_accepts_post(client, cast):
    job = submit(cast["alpha"], cast["uma"])
    client.force_login(cast["uma"])
    assert client.get(job_url(job, "jobs:cancel")).status_code == 405


# Submit form --------------------------------------------------------------------------------

def test_the_nav_link_opens_the_form_of_the_first_project_where_the_user_may_submit(client, cast):
    client.force_login(cast["uma"])
    response = client.get(reverse("jobs:create_default"))
    assert response.status_code == 302 and response["Location"] == create_url("alpha", "us-central1")
    client.force_login(cast["vic"])
    assert client.get(reverse("jobs:create_default")).status_code == 403


def test_the_whole_catalog_choice_survives_the_nav_links_redirect_and_the_links_to_other_projects(client, cast):
    membership_set(project=cast["beta"], user=cast["uma"], role=USER)
    client.force_login(cast["uma"])
    response = client.get(reverse("jobs:create_default") + "?catalog=1")
    assert response.status_code == 302 and response["Location"] == create_url("alpha", "us-central1") + "?catalog=1"
    page = client.get(response["Location"]).content.decode()
    assert f'href="{create_url("beta", "us-central1")}?catalog=1"' in page
    assert f'href="{create_url("beta", "us-central1")}"' in client.get(create_url()).content.decode()


def test_a_viewer_gets_403_on_the_submit_form(client, cast):
    client.force_login(cast["vic"])
    assert client.get(create_url()).status_code == 403
    assert client.post(create_url(), form_data()).status_code == 403
    assert not CustomJob.objects.exists()


def test_a_stranger_gets_404_on_the_submit_form_of_a_project(client, cast):
    client.force_login(cast["mallory"])
    assert client.get(create_url("alpha")).status_code == 404


def test_the_submit_form_embeds_the_machine_catalog_for_the_accelerator_selects(client, cast):
    client.force_login(cast["uma"])
    response = client.get(create_url())
    content = response.content.decode()
    assert response.status_code == 200
    assert '<script id="machine-catalog" type="application/json">' in content
    assert '"n1-standard-4": {"NVIDIA_TESLA_T4": [1, 2, 4]' in content
    assert 'value="us-central1"' in content
    assert content.count("data-worker-pool") == 4


def test_a_valid_form_post_creates_the_job_and_redirects_to_it(client, cast, nodes):
    client.force_login(cast["uma"])
    response = client.post(create_url(), form_data())
    job = CustomJob.objects.get()
    assert response.status_code == 302 and response["Location"] == job_url(job)
    assert job.display_name == "from the form" and job.created_by == cast["uma"]
    assert job.timeout_seconds == 3600 and job.gpu_count == 1
    pool = job.spec["jobSpec"]["workerPoolSpecs"][0]
    assert pool["machineSpec"] == {"machineType": "n1-standard-4", "acceleratorType": "NVIDIA_TESLA_T4",
                                   "acceleratorCount": 1}
    assert pool["containerSpec"]["command"] == ["python3", "-c"]
    assert pool["containerSpec"]["args"] == ["print('hi')", "--flag=1"]
    assert pool["containerSpec"]["env"] == [{"name": "MODE", "value": "train"}, {"name": "URL", "value": "http://x/?a=b"}]


def test_the_form_submits_extra_pools_skips_empty_ones_and_uses_its_location(client, cast):
    # FLEX_START is refused where the whole inventory could never hold the gang (4 A100 VMs).
    node_pool_ensure(name="eu-a100", machine_type="a2-highgpu-1g", node_count=4, location="europe-west4")
    client.force_login(cast["uma"])
    data = form_data(**{"location": "europe-west4", "strategy": "FLEX_START", "max_wait": "0s",
                        "catalog": "True",  # europe-west4 has no nodes: queued on the user's explicit choice
                        "restart_job_on_worker_restart": "on",
                        "pool0-machine_type": "a2-highgpu-1g", "pool0-accelerator_type": "",
                        "pool0-accelerator_count": "",
                        "pool2-machine_type": "a2-highgpu-1g", "pool2-replica_count": "3",
                        "pool2-image_uri": "worker:1"})
    response = client.post(create_url(), data)
    job = CustomJob.objects.get()
    assert response.status_code == 302 and job.location == "europe-west4"
    pools = job.spec["jobSpec"]["workerPoolSpecs"]
    assert pools[1] == {} and pools[2]["replicaCount"] == 3 and pools[2]["containerSpec"]["imageUri"] == "worker:1"
    assert job.strategy == "FLEX_START" and job.max_wait_seconds is None and job.replica_count == 4
    assert job.spec["jobSpec"]["scheduling"]["restartJobOnWorkerRestart"] is True


def test_an_accelerator_that_cannot_be_attached_is_shown_and_nothing_is_created(client, cast):
    client.force_login(cast["uma"])
    response = client.post(create_url(), form_data(**{"pool0-accelerator_type": "NVIDIA_H100_80GB"}))
    assert response.status_code == 200
    content = response.content.decode()
    # the summary names the form's field, not the JSON path
    assert "<strong>Worker pool 0 · Accelerator type</strong>" in content and "workerPoolSpecs[0]" not in content
    assert 'id="id_pool0-accelerator_type_error"' in content  # and on the field itself
    assert "NVIDIA_H100_80GB cannot be attached to machine type n1-standard-4" in content
    assert not CustomJob.objects.exists()


def test_a_missing_image_is_shown_on_its_field_and_nothing_is_created(client, cast):
    client.force_login(cast["uma"])
    response = client.post(create_url(), form_data(**{"pool0-image_uri": "", "timeout": "soon"}))
    assert response.status_code == 200
    content = response.content.decode()
    assert "<strong>Worker pool 0 · Container image URI</strong>" in content
    assert 'id="id_pool0-image_uri_error"' in content
    assert 'id="id_timeout_error"' in content
    assert not CustomJob.objects.exists()


@pytest.mark.parametrize("overrides, error_id", [
    ({"pool0-env": "JUST_A_NAME"}, "id_pool0-env_error"),
    ({"pool0-machine_type": ""}, "id_pool0-machine_type_error"),
    ({"pool0-machine_type": "z9-imaginary"}, "id_pool0-machine_type_error"),
    ({"pool1-machine_type": "n1-standard-4", "pool1-replica_count": "0"}, "id_pool1-replica_count_error"),
    ({"display_name": ""}, "id_display_name_error"),
    ({"location": "Not A Location"}, "id_location_error"),
])
def test_input_the_form_cannot_read_is_shown_on_its_field(client, cast, overrides, error_id):
    client.force_login(cast["uma"])
    response = client.post(create_url(), form_data(**overrides))
    assert response.status_code == 200
    assert f'id="{error_id}"' in response.content.decode()
    assert not CustomJob.objects.exists()


def test_a_starting_or_stopping_gang_shows_its_progress(client, cast, nodes, now):
    pools = (container_pool(), container_pool(replicas=2))
    job = submit(cast["alpha"], cast["uma"], *pools)
    t4 = list(nodes["t4"].nodes.all())
    assert services.jobs_place(assignments={job.pk: {(0, 0): (t4[0].pk, []), (1, 0): (t4[1].pk, []),
                                                     (1, 1): (t4[2].pk, [])}}, now=now)
    primary, *workers = job.replicas.order_by("pool_index", "replica_index")
    services.replica_started(replica=primary, now=now)
    client.force_login(cast["uma"])
    content = client.get(job_url(job, "jobs:detail_status")).content.decode()
    assert "Starting replicas: 1 of 3 running" in content and 'max="3" value="1"' in content
    for replica in (primary, *workers):
        services.replica_started(replica=replica, now=now)
    services.job_cancel(job=job, now=now)
    services.replica_exited(replica=workers[0], exit_code=-15, now=now)
    content = client.get(job_url(job, "jobs:detail_status")).content.decode()
    assert "Stopping replicas: 1 of 3 stopped" in content


# Numbers on the job page ----------------------------------------------------------------------

def test_the_job_page_gives_the_cost_so_far_and_its_timeout_bound_and_gpu_counts_not_indices(client, cast, nodes,
                                                                                          now):
    job = submit(cast["alpha"], cast["uma"], container_pool(accelerator="NVIDIA_TESLA_T4", count=1),
                 scheduling={"timeout": "3600s"})
    node = nodes["t4"].nodes.first()
    assert services.jobs_place(assignments={job.pk: {(0, 0): (node.pk, [0])}}, now=now) == {job.pk}
    client.force_login(cast["uma"])
    content = client.get(job_url(job)).content.decode()
    assert "Cost so far" in content and "if it runs to its timeout (1h 00m)" in content
    assert "Estimated cost" not in content
    assert '<td class="num"><span title="GPU 0">1</span></td>' in content


def test_log_lines_bring_the_state_badge_and_a_finished_job_says_it_wrote_nothing(client, cast, nodes, now):
    job = submit(cast["alpha"], cast["uma"])
    place_on(job, nodes["t4"].nodes.first(), now)
    replica = job.replicas.get()
    services.replica_started(replica=replica, now=now)
    client.force_login(cast["uma"])
    assert 'data-empty="No output yet."' in client.get(job_url(job)).content.decode()
    services.replica_logs_append(replica=replica, lines=[("stdout", now, "step 1")])
    fragment = client.get(job_url(job, "jobs:detail_logs"), {"after": 0}).content.decode()
    assert '<span id="job-state" hx-swap-oob="true"><span class="badge badge--running">' in fragment
    services.job_cancel(job=job)
    quiet = submit(cast["alpha"], cast["uma"])
    services.job_cancel(job=quiet)
    assert 'data-empty="The job wrote no output."' in client.get(job_url(quiet)).content.decode()


# Command lines ----------------------------------------------------------------------------------

def test_a_command_line_is_split_as_a_shell_splits_it(client, cast, nodes):
    client.force_login(cast["uma"])
    snippet = "python3 -c \"import sys\nprint('hello', sys.argv)\""
    response = client.post(create_url(), form_data(**{"pool0-command": snippet, "pool0-args": "--lr 0.1 'my run'"}))
    assert response.status_code == 302
    container = CustomJob.objects.get().spec["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]
    assert container["command"] == ["python3", "-c", "import sys\nprint('hello', sys.argv)"]
    assert container["args"] == ["--lr", "0.1", "my run"]


def test_an_unclosed_quote_is_shown_on_its_field(client, cast):
    client.force_login(cast["uma"])
    content = client.post(create_url(), form_data(**{"pool0-command": "python3 -c \"print('hi')"})).content.decode()
    assert 'id="id_pool0-command_error"' in content and "No closing quotation" in content
    assert not CustomJob.objects.exists()


def test_the_form_shows_the_argument_list_before_submit(client, cast):
    client.force_login(cast["uma"])
    assert 'hx-get="/jobs/argv"' in client.get(create_url()).content.decode()
    preview = client.get("/jobs/argv", {"prefix": "pool1", "pool1-command": "python3 -c \"print('hello')\"",
                                        "pool1-args": "a\nb"}).content.decode()
    assert "Runs 5 arguments" in preview
    assert "<li><code>print(&#x27;hello&#x27;)</code></li>" in preview and "<li><code>b</code></li>" in preview
    problem = client.get("/jobs/argv", {"prefix": "pool0", "pool0-args": "'open"}).content.decode()
    assert "Arguments: No closing quotation" in problem
    assert client.get("/jobs/argv", {"prefix": "../x"}).status_code == 400


def test_a_refused_page_request_shows_the_reason_on_the_400_page(client, cast):
    client.force_login(cast["uma"])
    response = client.get("/jobs/argv", {"prefix": "../x"})
    assert response.status_code == 400
    assert "bad_request.html" in [t.name for t in response.templates]
    assert "prefix must name a worker pool (pool0 ... pool3)" in response.content.decode()


def test_a_suspicious_request_keeps_the_bare_400_page(client, cast):
    client.force_login(cast["uma"])
    response = client.get("/jobs/argv", {"prefix": "pool0"}, HTTP_HOST="attacker.example")
    assert response.status_code == 400
    assert response.templates == [] and b"attacker" not in response.content


# What this location can run ---------------------------------------------------------------------

def test_the_form_offers_this_locations_machine_types_with_free_and_total_nodes(client, cast, nodes, now):
    busy = submit(cast["alpha"], cast["uma"], container_pool(accelerator="NVIDIA_TESLA_T4"))
    place_on(busy, nodes["t4"].nodes.first(), now)
    client.force_login(cast["uma"])
    page = client.get(create_url()).content.decode()
    select = page.split('name="pool0-machine_type"', 1)[1].split("</select>", 1)[0]
    assert '<optgroup label="Nodes in us-central1">' in select
    assert "n1-standard-4 (4 vCPU, 15 GiB) — 2 of 3 nodes free, 4 × T4" in select
    assert "a3-highgpu-8g (208 vCPU, 1872 GiB, 8 × H100 80GB) — 1 of 1 node free<" in select  # GPUs said once
    assert "e2-standard-8" not in select  # the catalog waits behind a choice
    assert 'href="?catalog=1"' in page
    catalog = client.get(create_url() + "?catalog=1").content.decode()
    assert "e2-standard-8" in catalog.split('name="pool0-machine_type"', 1)[1].split("</select>", 1)[0]
    assert 'name="catalog" value="True"' in catalog


@pytest.mark.parametrize("overrides, field, message", [
    ({"pool0-machine_type": "e2-standard-8", "pool0-accelerator_type": "", "pool0-accelerator_count": ""},
     "machine_type", "us-central1 has no e2-standard-8 node, so this job could never start"),
    ({"pool1-machine_type": "a2-highgpu-1g", "pool1-replica_count": "3", "pool1-image_uri": "w:1"},
     "replica_count", "us-central1 has 2 a2-highgpu-1g nodes with 1 × A100; the job asks for 3 at once"),
])
def test_a_job_that_can_never_fit_is_refused_at_once_unless_the_catalog_was_chosen(client, cast, nodes, overrides,
                                                                                  field, message):
    client.force_login(cast["uma"])
    response = client.post(create_url(), form_data(catalog="False", **overrides))  # as the form posts it
    content = response.content.decode()
    assert response.status_code == 200 and message in content, content
    pool = "pool0" if "pool0-machine_type" in overrides else "pool1"
    assert f'id="id_{pool}-{field}_error"' in content
    assert not CustomJob.objects.exists()
    assert client.post(create_url(), form_data(catalog="True", **overrides)).status_code == 302


def test_the_job_page_shows_the_command_as_the_line_the_form_splits_back(client, cast):
    job = submit(cast["alpha"], cast["uma"], container_pool(command=["python3", "-c", "print('a b')"]))
    client.force_login(cast["uma"])
    content = client.get(job_url(job)).content.decode()
    assert "<code class=\"argv\">python3 -c &quot;print(&#x27;a b&#x27;)&quot;</code>" in content


def test_pools_of_one_shape_that_together_never_fit_are_told_once(client, cast, nodes):
    client.force_login(cast["uma"])
    data = form_data(**{"pool0-machine_type": "a2-highgpu-1g", "pool0-accelerator_type": "",
                        "pool0-accelerator_count": "", "pool1-machine_type": "a2-highgpu-1g",
                        "pool1-replica_count": "2", "pool1-image_uri": "w:1"})
    content = client.post(create_url(), data).content.decode()
    assert content.count("the job asks for 3 at once") == 2  # in the summary and on pool 1's replica count
    assert 'id="id_pool1-replica_count_error"' in content and not CustomJob.objects.exists()


def test_the_job_page_says_how_each_replica_ran_and_when_its_image_was_not_pulled(client, cast, nodes, now):
    from trainhub.inventory.models import Node

    job = submit(cast["alpha"], cast["uma"], container_pool(command=["true"]), name="where")
    node = nodes["t4"].nodes.first()
    Node.objects.filter(pk=node.pk).update(facts={"runtime": "subprocess"})
    place_on(job, node, now)
    client.force_login(cast["uma"])
    assert "subprocess · image not pulled" in client.get(job_url(job)).content.decode()
    Node.objects.filter(pk=node.pk).update(facts={"runtime": "podman"})
    content = client.get(job_url(job)).content.decode()
    assert "subprocess · image not pulled" not in content and "ran the image with podman" in content
