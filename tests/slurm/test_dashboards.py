"""Slurm clusters on the dashboards: their GPUs on the allocation chart and sshare's rows on the
fair-share chart, for the members of the cluster's project only."""

import datetime as dt
import re

import pytest
from django.utils import timezone

from tests.dashboards.test_views import chart_url, csv_rows, figure_of
from tests.slurm.conftest import run_pass
from trainhub.dashboards.models import QueueSample
from trainhub.dashboards.services import samples_record
from trainhub.inventory.models import Node, NodeState
from trainhub.slurm.models import Association, JobState
from trainhub.slurm.services.jobs import Submission, job_submit

SCOPE = "alpha/us-central1/c1"


@pytest.fixture
def sampled(accounts, cast, monkeypatch):
    """uma's 8-GPU job running on one of c1's two B200x8 nodes, the other node down; one sample."""
    now = timezone.now()
    monkeypatch.setattr(timezone, "now", lambda: now)
    job = job_submit(cluster=accounts, user=cast["uma"], now=now,
                     submission=Submission(argv=("--gres=gpu:8", "--wrap", "train")))
    run_pass(accounts, now)
    job.refresh_from_db()
    assert job.state == JobState.RUNNING
    Node.objects.filter(name__startswith="a4").exclude(name=job.node_list).update(state=NodeState.DOWN)
    samples_record(now=now)
    return job


def cluster_rows(client):
    return [row for row in csv_rows(client, "gpu-allocation", range="1h") if row["source"] == "cluster"]


def test_a_member_sees_the_clusters_busy_gpus_and_the_capacity_of_its_nodes_that_are_up(client, cast, sampled):
    client.force_login(cast["vic"])
    rows = cluster_rows(client)
    assert [(row["scope"], row["gpu_type"], row["allocated_gpus"], row["total_gpus"]) for row in rows] == [
        (SCOPE, "NVIDIA_B200", "8.0", "8.0")]
    names = [trace["name"] for trace in figure_of(client.get(chart_url("gpu-allocation", range="1h")))["data"]]
    assert f"{SCOPE} (cluster)" in names


def test_the_cluster_is_not_counted_twice_in_the_capacity_line(client, cast, sampled):
    client.force_login(cast["vic"])
    figure = figure_of(client.get(chart_url("gpu-allocation", range="1h")))
    pools = [row for row in csv_rows(client, "gpu-allocation", range="1h")
             if row["source"] == "pool" and row["gpu_type"] == "NVIDIA_B200"]
    capacity = next(trace for trace in figure["data"] if trace["name"] == "capacity" and trace["yaxis"] ==
                    next(t["yaxis"] for t in figure["data"] if t["name"] == f"{SCOPE} (cluster)"))
    assert capacity["y"][-1] == sum(float(row["total_gpus"]) for row in pools)


def test_a_stranger_does_not_see_another_projects_cluster(client, cast, sampled):
    client.force_login(cast["mallory"])
    assert cluster_rows(client) == []
    content = client.get(chart_url("gpu-allocation", range="1h")).content.decode()
    assert SCOPE not in content


def test_the_fair_share_chart_shows_sshare_rows_of_the_members_clusters(client, cast, accounts):
    Association.objects.filter(cluster=accounts, user="uma").update(raw_usage=100.0, decay_usage=100.0)
    Association.objects.filter(cluster=accounts, account__name="ml", user="").update(shares=3)
    client.force_login(cast["uma"])
    rows = csv_rows(client, "fair-share")
    assert [(row["cluster"], row["account"], row["user"], row["raw_shares"]) for row in rows] == [
        ("c1", "bio", "", "1"), ("c1", "ml", "", "3"), ("c1", "ml", "uma", "1")]
    ml = rows[1]
    assert float(ml["norm_shares"]) == pytest.approx(3 / 5)  # root 1 (user root), ml 3, bio 1
    assert float(ml["effective_usage"]) > 0
    assert float(rows[2]["fairshare"]) < 1
    response = client.get(chart_url("fair-share"))
    assert figure_of(response)["data"][0]["y"] == ["bio", "ml", "ml / uma"]
    assert "use more than their share" in response.content.decode()


def test_the_fair_share_chart_hides_other_projects_clusters(client, cast, accounts):
    client.force_login(cast["mallory"])
    assert csv_rows(client, "fair-share") == []
    assert "No Slurm clusters" in client.get(chart_url("fair-share")).content.decode()


def test_slurm_jobs_are_counted_in_the_kpis_queue_depth_jobs_by_state_and_why_jobs_wait(client, cast, sampled,
                                                                                       accounts):
    waiting = job_submit(cluster=accounts, user=cast["uma"], now=timezone.now(),
                         submission=Submission(argv=("--gres=gpu:8", "-N", "2", "--wrap", "train")))
    run_pass(accounts, timezone.now())
    waiting.refresh_from_db()
    assert waiting.state == JobState.PENDING
    QueueSample.objects.all().delete()  # this minute again, with the waiting job
    samples_record(now=timezone.now())
    client.force_login(cast["uma"])
    kpis = client.get("/dashboards/").context["kpi"]
    assert kpis["gpus_allocated"] == 8 and kpis["running_jobs"] == 1 and kpis["running_gpus"] == 8
    assert kpis["waiting_jobs"] == 1 and kpis["waiting_gpus"] == 16
    states = {(row["state"], row["gpu_type"]): row for row in csv_rows(client, "jobs-by-state", range="1h")}
    assert states[("JOB_STATE_RUNNING", "NVIDIA_B200")]["active_jobs"] == "1"
    assert states[("JOB_STATE_PENDING", "NVIDIA_B200")]["active_gpus"] == "16"
    queue = [row for row in csv_rows(client, "queue-depth", range="1h") if row["gpu_type"] == "NVIDIA_B200"]
    assert float(queue[-1]["pending_jobs"]) == 1 and float(queue[-1]["waiting_gpus"]) == 16
    [row] = csv_rows(client, "waiting-jobs")
    assert row["job_id"] == str(waiting.job_id) and row["gpu_type"] == "NVIDIA_B200" and row["gpus"] == "16"
    assert row["reasons"].startswith("Slurm reason: ") and row["url"].endswith(f"/jobs/{waiting.job_id}/")
    assert "partition a4" in client.get(chart_url("waiting-jobs")).content.decode()


def test_a_slurm_job_no_pass_has_looked_at_says_so_rather_than_reason_none(client, cast, sampled, accounts):
    job_submit(cluster=accounts, user=cast["uma"], now=timezone.now(),
               submission=Submission(argv=("--gres=gpu:8", "-N", "2", "--wrap", "train")))
    client.force_login(cast["uma"])
    [row] = csv_rows(client, "waiting-jobs")
    assert row["reasons"] == "Slurm reason: None yet (the next scheduler pass has not looked at it)"


def test_the_quota_page_counts_each_projects_slurm_jobs_at_the_on_demand_price(client, cast, accounts):
    """An ended 8-GPU job that ran an hour and one running for half an hour: 12 GPU-hours of B200,
    priced as a team page prices them; the cost sits beside CustomJobs' and persistent resources'."""
    from tests.slurm.conftest import make_job, start_job
    from trainhub.catalog.pricing import SLURM, cost_of
    from trainhub.jobs.costs import prices
    from trainhub.slurm.dashboard import project_costs
    from trainhub.slurm.models import SlurmJob

    now = timezone.now().replace(microsecond=0)  # slurmctld's clock: a start is a whole second
    ended = make_job(accounts, gpus_per_node=8, num_nodes=1, now=now - dt.timedelta(hours=3))
    start_job(ended, ["a4-0"], now=now - dt.timedelta(hours=2))
    SlurmJob.objects.filter(pk=ended.pk).update(state=JobState.COMPLETED, end_time=now - dt.timedelta(hours=1))
    running = make_job(accounts, gpus_per_node=8, num_nodes=1, now=now - dt.timedelta(hours=1))
    start_job(running, ["a4-1"], now=now - dt.timedelta(minutes=30))
    make_job(accounts, gpus_per_node=8, num_nodes=1, now=now)  # pending: nothing yet
    [cost] = project_costs(project_ids=[accounts.project_id], now=now)
    assert (cost.project_id, cost.jobs) == ("alpha", 2)
    assert cost.gpu_hours == pytest.approx(12, abs=0.001)
    assert cost.total == pytest.approx(cost_of({"NVIDIA_B200": 12 * 3600}, 1.0, SLURM, prices()).total, abs=0.01)
    client.force_login(cast["alice"])
    page = client.get("/quotas/").content.decode()
    [later] = project_costs(project_ids=[accounts.project_id], now=timezone.now())
    # The page prices the running job when it renders, a moment (seconds on a loaded machine) after ``now``.
    section = page[page.index("Slurm jobs per project"):]
    shown = [float(number.replace(",", "")) for number in re.findall(r"\d[\d,]*\.\d\d", section)]
    assert any(cost.total - 0.005 <= value <= later.total + 0.005 for value in shown), (cost.total, later.total)
