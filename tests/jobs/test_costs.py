import datetime as dt

from tests.conftest import container_pool, job_body
from trainhub.catalog.pricing import build_prices, cost_of
from trainhub.jobs import services
from trainhub.jobs.costs import job_cost, project_costs
from trainhub.jobs.models import CustomJob


def test_flex_start_is_billed_at_the_dws_price_plus_the_management_fee():
    prices = build_prices({"NVIDIA_H100_80GB": {"onDemand": 10.0, "flexStart": 4.0}}, management_fee_percent=10)
    flex = cost_of({"NVIDIA_H100_80GB": 8}, 3600, "FLEX_START", prices)
    assert flex.gpu_hours == {"NVIDIA_H100_80GB": 8.0}
    assert flex.infrastructure == 32.0
    assert round(flex.management_fee, 6) == 3.2
    assert flex.on_demand_equivalent == 80.0
    assert cost_of({"NVIDIA_H100_80GB": 8}, 3600, "STANDARD", prices).infrastructure == 80.0


def test_a_job_shows_estimated_and_accrued_cost(cast, now, settings, api):
    settings.TRAINHUB_GPU_PRICES = {"NVIDIA_TESLA_A100": {"onDemand": 2.0}}
    settings.TRAINHUB_MANAGEMENT_FEE_PERCENT = 0
    body = job_body(container_pool("a2-highgpu-1g"), container_pool("a2-highgpu-1g"), scheduling={"timeout": "7200s"})
    job = services.job_submit(project=cast["alpha"], location="us-central1", user=cast["uma"], body=body, now=now)
    job.start_time = now
    job.save()
    cost = job_cost(job, now + dt.timedelta(minutes=30))
    assert cost.estimated.total == 8.0  # 2 GPUs x 2 h x $2
    assert cost.accrued.total == 2.0  # 2 GPUs x 0.5 h x $2
    rendered = api("uma").get(f"/v1/{job.resource_name}").json()["trainhubStatus"]["cost"]
    assert rendered["estimated"]["totalUsd"] == 8.0
    assert project_costs(project_ids=[cast["alpha"].pk], now=now + dt.timedelta(hours=1))[0].total == 4.0


def test_the_job_page_shows_accrued_and_estimated_cost(client, cast, now, settings):
    settings.TRAINHUB_GPU_PRICES = {"NVIDIA_TESLA_A100": {"onDemand": 2.0}}
    settings.TRAINHUB_MANAGEMENT_FEE_PERCENT = 0
    body = job_body(container_pool("a2-highgpu-1g"), scheduling={"timeout": "3600s"})
    job = services.job_submit(project=cast["alpha"], location="us-central1", user=cast["uma"], body=body, now=now)
    client.force_login(cast["vic"])
    content = client.get(f"/projects/alpha/locations/us-central1/jobs/{job.job_id}/").content.decode()
    assert "<dt>Cost so far</dt><dd>$0.00" in content
    assert "at most $2.00 if it runs to its timeout (1h 00m)" in content


def test_the_job_page_groups_the_thousands_of_a_large_cost(client, cast, now, settings):
    settings.TRAINHUB_GPU_PRICES = {"NVIDIA_TESLA_A100": {"onDemand": 2.0}}
    settings.TRAINHUB_MANAGEMENT_FEE_PERCENT = 0
    body = job_body(container_pool("a2-highgpu-1g"), scheduling={"timeout": "604800s"})  # the 7-day default
    job = services.job_submit(project=cast["alpha"], location="us-central1", user=cast["uma"], body=body, now=now)
    client.force_login(cast["vic"])
    content = client.get(f"/projects/alpha/locations/us-central1/jobs/{job.job_id}/").content.decode()
    assert "at most $336.00 if it runs" in content
    settings.TRAINHUB_GPU_PRICES = {"NVIDIA_TESLA_A100": {"onDemand": 20.0}}
    content = client.get(f"/projects/alpha/locations/us-central1/jobs/{job.job_id}/").content.decode()
    assert "at most $3,360.00 if it runs to its timeout (7d 00h)" in content


def test_a_projects_cost_is_its_finished_jobs_ledger_plus_its_running_jobs(cast, now, settings, nodes):
    settings.TRAINHUB_GPU_PRICES = {"NVIDIA_TESLA_A100": {"onDemand": 2.0}, "NVIDIA_TESLA_T4": {"spot": 1.0}}
    settings.TRAINHUB_MANAGEMENT_FEE_PERCENT = 0
    finished = services.job_submit(project=cast["alpha"], location="us-central1", user=cast["uma"], now=now,
                                   body=job_body(container_pool("a2-highgpu-1g")))
    spot = services.job_submit(project=cast["alpha"], location="us-central1", user=cast["uma"], now=now,
                               body=job_body(container_pool(accelerator="NVIDIA_TESLA_T4", count=4),
                                             scheduling={"strategy": "SPOT"}))
    for job, node in ((finished, nodes["a100"].nodes.first()), (spot, nodes["t4"].nodes.first())):
        services.jobs_place(assignments={job.pk: {(0, 0): (node.pk, [0])}}, now=now)
        services.replica_started(replica=job.replicas.get(), now=now)
    services.replica_exited(replica=finished.replicas.get(), exit_code=0, now=now + dt.timedelta(hours=2))
    services.job_delete(job=CustomJob.objects.get(pk=finished.pk))  # what it cost stays booked
    costs = project_costs(project_ids=[cast["alpha"].pk], now=now + dt.timedelta(hours=3))
    assert [(c.project_id, c.jobs, c.gpu_hours, c.total) for c in costs] == [("alpha", 2, 2.0 + 12.0, 4.0 + 12.0)]


def test_the_cost_of_any_history_takes_two_queries(cast, now, django_assert_num_queries):
    for index in range(5):
        job = services.job_submit(project=cast["alpha"], location="us-central1", user=cast["uma"], now=now,
                                  body=job_body(container_pool("a2-highgpu-1g"), scheduling={"strategy": "SPOT"}
                                                if index % 2 else None))
        CustomJob.objects.filter(pk=job.pk).update(start_time=now)
        services.job_fail(job=job, now=now + dt.timedelta(minutes=index), code=13, message="x")
    with django_assert_num_queries(2):
        [cost] = project_costs(project_ids=[cast["alpha"].pk], now=now)
    assert cost.jobs == 5 and round(cost.gpu_hours * 60) == 0 + 1 + 2 + 3 + 4
