"""Best-effort Redis writes: sent at once, or together in one pipeline inside one_round_trip()."""

import logging

import pytest
import redis
from redis.exceptions import ConnectionError as RedisConnectionError

from trainhub.common.redis import best_effort, one_round_trip


@pytest.fixture
def round_trips(monkeypatch, redis_client):
    """How many pipelines were sent, and how many commands each held."""
    sent = []
    execute = redis.client.Pipeline.execute

    def counting(pipe, *args, **kwargs):
        sent.append(len(pipe))
        return execute(pipe, *args, **kwargs)

    monkeypatch.setattr(redis.client.Pipeline, "execute", counting)
    return sent


def test_writes_in_one_round_trip_share_a_pipeline_and_each_gets_its_own_replies(round_trips, redis_client):
    replies = {}
    with one_round_trip():
        best_effort(lambda pipe: pipe.incr("a"), answered=lambda r: replies.update(a=r), failed=print)
        best_effort(lambda pipe: (pipe.set("b", 1, nx=True), pipe.set("b", 2, nx=True)),
                    answered=lambda r: replies.update(b=r), failed=print)
        assert redis_client.get("a") is None  # nothing sent before the block ends
    assert round_trips == [3]
    assert replies == {"a": [1], "b": [True, None]}
    assert redis_client.get("b") == b"1"


def test_outside_a_block_a_write_is_sent_at_once(round_trips, redis_client):
    best_effort(lambda pipe: pipe.incr("a"), failed=print)
    best_effort(lambda pipe: pipe.incr("a"), failed=print)
    assert round_trips == [1, 1] and redis_client.get("a") == b"2"


def test_when_redis_does_not_answer_every_write_is_told_and_nothing_is_raised(monkeypatch, redis_client):
    def refuse(pipe, *args, **kwargs):
        raise RedisConnectionError("connection refused")

    monkeypatch.setattr(redis.client.Pipeline, "execute", refuse)
    failures = []
    with one_round_trip():
        best_effort(lambda pipe: pipe.incr("a"), failed=failures.append)
        best_effort(lambda pipe: pipe.incr("b"), failed=failures.append)
    assert [str(exc) for exc in failures] == ["connection refused", "connection refused"]


def test_a_failing_follow_up_is_logged_not_raised_and_the_others_still_run(redis_client, caplog):
    answered = []

    def broken(replies):
        raise RuntimeError("broker down")

    with caplog.at_level(logging.ERROR, logger="trainhub.common.redis"), one_round_trip():
        best_effort(lambda pipe: pipe.incr("a"), answered=broken, failed=print)
        best_effort(lambda pipe: pipe.incr("b"), answered=answered.append, failed=print)
    assert answered == [[1]]
    assert "broker down" in caplog.text
