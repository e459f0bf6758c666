"""Cluster and job pages: members see them, strangers get 404, admins edit, forms need CSRF."""

from django.test import Client

from tests.conftest import later
from tests.slurm.conftest import make_job, start_job
from trainhub.slurm.models import ClusterAuditEntry, JobState, SlurmCluster, SlurmJob

BASE = "/slurm/projects/alpha/locations/us-central1/clusters/c1"


def test_members_see_the_cluster_list_and_page(browser, cluster):
    page = browser("vic").get("/slurm/")
    assert page.status_code == 200 and b"c1" in page.content
    detail = browser("vic").get(f"{BASE}/")
    assert detail.status_code == 200
    body = detail.content.decode()
    assert "PriorityWeightFairshare" in body and "a4-0" in body and "First prolog script running" in body
    assert "Edit" not in body  # a viewer edits nothing


def test_strangers_get_404(browser, cluster):
    assert browser("mallory").get(f"{BASE}/").status_code == 404
    listing = browser("mallory").get("/slurm/")
    assert listing.context["clusters"] == [] and BASE.encode() not in listing.content  # (a bare "c1" can be in a CSRF token)


def test_slurm_conf_downloads_as_text(browser, cluster):
    response = browser("vic").get(f"{BASE}/slurm.conf")
    assert response["Content-Type"].startswith("text/plain")
    assert "attachment" in response["Content-Disposition"]
    assert b"PreemptMode=REQUEUE" in response.content


def test_admins_edit_config_through_the_page(browser, cluster):
    assert browser("uma").get(f"{BASE}/config").status_code == 403
    page = browser("alice").get(f"{BASE}/config")
    assert b"PriorityWeightAge=1000" in page.content
    text = page.context["form"].initial["text"].replace("PriorityWeightAge=1000", "PriorityWeightAge=3000")
    response = browser("alice").post(f"{BASE}/config", {"text": text})
    assert response.status_code == 302
    assert SlurmCluster.objects.get().config["PriorityWeightAge"] == "3000"
    assert ClusterAuditEntry.objects.filter(subject="slurm.conf PriorityWeightAge", actor="alice").exists()


def test_a_bad_key_is_shown_on_the_field(browser, cluster):
    response = browser("alice").post(f"{BASE}/config", {"text": "PriorityWeightAge=lots"})
    assert response.status_code == 200
    assert "PriorityWeightAge" in str(response.context["form"].errors["text"])


def test_admins_drain_and_resume_a_node(browser, cluster):
    browser("alice").post(f"{BASE}/nodes/a4-0/state", {"state": "DRAIN", "reason": "maintenance"})
    from trainhub.inventory.models import Node

    assert Node.objects.get(name="a4-0").state_reason == "maintenance"
    browser("alice").post(f"{BASE}/nodes/a4-0/state", {"state": "UP"})
    assert Node.objects.get(name="a4-0").state == "UP"
    assert browser("uma").post(f"{BASE}/nodes/a4-0/state", {"state": "UP"}).status_code == 403


def test_admins_edit_scripts_and_partitions(browser, cluster):
    response = browser("alice").post(f"{BASE}/scripts/epilog", {"script_0": "#!/bin/bash\necho bye", "script_1": ""})
    assert response.status_code == 302
    assert SlurmCluster.objects.get().epilog_scripts == ["#!/bin/bash\necho bye"]
    response = browser("alice").post(f"{BASE}/partitions/a4", {"text": "PriorityTier=5", "node_pools": "a4"})
    assert response.status_code == 302
    assert cluster.partitions.get().config == {"PriorityTier": "5"}


def test_forms_need_a_csrf_token(cast, cluster):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(cast["alice"])
    assert browser.post(f"{BASE}/config", {"text": ""}).status_code == 403


def test_the_submit_form_submits_and_shows_slurms_errors_on_fields(browser, accounts):
    response = browser("uma").post(f"{BASE}/jobs/new", {"nodes": 1, "gpus_per_node": 2, "wrap": "hostname",
                                                        "account": "bio"})
    assert response.status_code == 200
    assert "Invalid account" in str(response.context["form"].errors["account"])
    response = browser("uma").post(f"{BASE}/jobs/new", {"nodes": 1, "gpus_per_node": 2, "wrap": "hostname"})
    assert response.status_code == 302
    job_page = browser("uma").get(response["Location"])
    assert job_page.status_code == 200 and b"PENDING" in job_page.content


def test_a_test_only_script_from_the_form_shows_the_estimate_and_queues_nothing(browser, accounts):
    script = "#!/bin/bash\n#SBATCH --test-only\nhostname\n"
    response = browser("uma").post(f"{BASE}/jobs/new", {"nodes": 1, "gpus_per_node": 1, "script": script},
                                   follow=True)
    assert response.status_code == 200
    assert "sbatch: Job 1 to start at " in response.content.decode()
    assert not SlurmJob.objects.exists()


def test_the_job_page_cancels_for_its_owner_only(browser, accounts):
    job = make_job(accounts, user="uma")
    url = f"{BASE}/jobs/{job.job_id}"
    assert b"Cancel (scancel)" not in browser("vic").get(f"{url}/").content
    browser("uma").post(f"{url}/action", {"action": "cancel"})
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED
    assert browser("uma").get(f"{url}/status").status_code == 200


def test_a_pending_jobs_page_gives_its_reason_and_position(browser, accounts, now):
    first = make_job(accounts, user="uma", priority=100, submit_time=now)
    second = make_job(accounts, user="uma", priority=50, submit_time=now, reason="Priority")
    page = browser("uma").get(f"{BASE}/jobs/{second.job_id}/").content.decode()
    assert "Priority" in page and "position 2 in partition a4" in page
    page = browser("uma").get(f"{BASE}/jobs/{first.job_id}/").content.decode()
    assert "position 1 in partition a4" in page
    assert "<strong>Reason:</strong> None yet (the next scheduler pass has not looked at it)" in page
    assert "No events yet." in page


def test_a_live_jobs_page_polls_its_sections_and_posts_its_buttons_to_the_action_url(browser, accounts):
    job = make_job(accounts, user="uma")
    url = f"{BASE}/jobs/{job.job_id}"
    page = browser("uma").get(f"{url}/").content.decode()
    assert f'hx-get="{url}/status"' in page and f'hx-get="{url}/log"' in page
    assert f'action="{url}/action"' in page
    assert 'hx-get=""' not in page and 'action=""' not in page


def test_a_started_gpu_jobs_page_shows_its_cost_so_far_at_the_on_demand_price(browser, accounts, now):
    from trainhub.catalog.pricing import DEFAULT_ON_DEMAND_PER_GPU_HOUR

    job = make_job(accounts, user="uma", gpus_per_node=8, submit_time=later(now, -7200))
    page = browser("uma").get(f"{BASE}/jobs/{job.job_id}/").content.decode()
    assert "Cost so far</dt><dd>—" in page and "8 × B200 at the on-demand price" in page
    start_job(job, ["a4-0"], now=later(now, -3600))
    page = browser("uma").get(f"{BASE}/jobs/{job.job_id}/").content.decode()
    cost = float(page.split("Cost so far</dt><dd>$", 1)[1].split(" ", 1)[0].replace(",", ""))
    assert cost >= 8 * DEFAULT_ON_DEMAND_PER_GPU_HOUR["NVIDIA_B200"]  # an hour of 8 B200s, and the fee
