"""A replica's stored log is capped (TRAINHUB_REPLICA_LOG_MAX_LINES) with one truncation marker; the
lines after it are counted and accepted, never stored, and never cost the job list a query."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.conftest import container_pool, job_body, later
from trainhub.jobs import services
from trainhub.jobs.models import LogLine, Replica
from trainhub.scheduling.services import scheduler_pass


@pytest.fixture
def replica(cast, nodes, now, settings):
    settings.TRAINHUB_REPLICA_LOG_MAX_LINES = 5
    job = services.job_submit(project=cast["alpha"], location="us-central1", user=cast["uma"],
                              body=job_body(container_pool()), now=now)
    scheduler_pass(now=now)
    return job.replicas.get()


def send(replica, now, first, count):
    return services.replica_logs_append(
        replica=replica, lines=[("stdout", later(now, n), f"line {n}") for n in range(first, first + count)])


def test_the_log_keeps_its_first_lines_then_one_marker_and_counts_the_rest(replica, now):
    assert send(replica, now, 0, 3) == 3
    assert send(replica, now, 3, 4) == 3  # two lines and the marker
    assert send(replica, now, 7, 10) == 0
    texts = list(LogLine.objects.filter(replica=replica).values_list("text", flat=True))
    assert texts[:5] == [f"line {n}" for n in range(5)]
    assert texts[5:] == [services.truncation_marker(5)]
    assert "Log truncated" in texts[5] and "TRAINHUB_REPLICA_LOG_MAX_LINES" in texts[5]
    assert Replica.objects.get(pk=replica.pk).log_lines == 17
    assert LogLine.objects.get(text=texts[5]).time == later(now, 5)  # when the first line was dropped


def test_a_log_that_reaches_the_cap_exactly_gets_the_marker_with_the_next_line(replica, now):
    send(replica, now, 0, 5)
    assert LogLine.objects.filter(replica=replica).count() == 5
    send(replica, now, 5, 1)
    assert LogLine.objects.filter(replica=replica).last().text == services.truncation_marker(5)
    assert LogLine.objects.filter(replica=replica).count() == 6


def test_the_rest_resource_counts_every_line_received(replica, now, api):
    send(replica, now, 0, 12)
    body = api("uma").get(f"/v1/{replica.job.resource_name}").json()["trainhubStatus"]["replicas"][0]
    assert body["logLines"] == 12


def test_a_long_log_costs_the_job_list_no_query(replica, now, client, cast):
    client.force_login(cast["uma"])
    url = reverse("jobs:list")
    with CaptureQueriesContext(connection) as before:
        assert client.get(url).status_code == 200
    for first in range(0, 500, 100):
        send(replica, now, first, 100)
    with CaptureQueriesContext(connection) as after:
        assert client.get(url).status_code == 200
    assert len(after) == len(before)
