"""The version live pages poll: it moves when a job's timeline changes or a pass runs, not otherwise."""

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from tests.conftest import later
from tests.jobs.test_views import submit
from trainhub.jobs import services
from trainhub.scheduling.services import scheduler_pass

pytestmark = pytest.mark.django_db


def version(client) -> str:
    response = client.get("/v1/scheduler:status")
    assert response.status_code == 200
    return response.json()["version"]


def test_the_version_moves_when_a_job_event_commits(client, cast, django_capture_on_commit_callbacks):
    client.force_login(cast["vic"])  # the browser polls with its session
    before = version(client)
    assert version(client) == before
    with django_capture_on_commit_callbacks(execute=True):
        job = submit(cast["alpha"], cast["uma"])
    submitted = version(client)
    assert submitted != before
    with django_capture_on_commit_callbacks(execute=True):
        services.job_cancel(job=job)
    assert version(client) != submitted


def test_the_version_moves_with_every_scheduler_pass(client, cast, now):
    client.force_login(cast["vic"])
    scheduler_pass(now=now)
    first = version(client)
    scheduler_pass(now=later(now, 5))
    assert version(client) != first


def test_without_redis_the_status_still_answers(client, cast, monkeypatch):
    def down():
        raise RedisConnectionError("redis is down")

    monkeypatch.setattr("trainhub.common.live.get_redis", down)
    monkeypatch.setattr("trainhub.scheduling.selectors.get_redis", down)
    client.force_login(cast["vic"])
    assert version(client) == "0/"
