import datetime as dt

from tests.conftest import container_pool, job_body
from trainhub.catalog.pricing import build_prices, cost_of
from trainhub.jobs import services
from trainhub.jobs.costs import job_cost, project_costs


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
    assert "Estimated cost" in content and "$2.00" in content and "$0.00" in content
