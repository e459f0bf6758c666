import datetime as dt

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models.signals import post_save, pre_save
from django.test.utils import CaptureQueriesContext

from trainhub.common.compiled import CompiledInsert, CompiledQuery, field_names, instances, rows_together
from trainhub.iam.models import ApiToken, Membership
from trainhub.jobs.models import CustomJob, JobEvent

User = get_user_model()

MEMBERSHIPS = CompiledQuery(
    lambda user_pk, project_id: Membership.objects.filter(user_id=user_pk, project__project_id=project_id)
    .values_list("role", "project__created", "user__is_active", "user__last_login"), -1, "\x00project")


def test_a_compiled_query_answers_what_the_queryset_answers_for_each_argument(cast):
    for user, project_id in ((cast["uma"], "alpha"), (cast["mallory"], "beta"), (cast["uma"], "beta")):
        expected = list(Membership.objects.filter(user_id=user.pk, project__project_id=project_id)
                        .values_list("role", "project__created", "user__is_active", "user__last_login"))
        assert MEMBERSHIPS.rows(user.pk, project_id) == expected


def test_its_rows_carry_python_values_not_the_databases(cast):
    [(role, created, is_active, last_login)] = MEMBERSHIPS.rows(cast["vic"].pk, "alpha")
    assert role == "viewer"
    assert isinstance(created, dt.datetime) and created.tzinfo is not None
    assert is_active is True  # SQLite stores 1; the field's converter gives a bool
    assert last_login is None


def test_it_builds_the_queryset_once_and_then_runs_one_statement_per_call(cast):
    built = []

    def usernames(pk):
        built.append(pk)
        return User.objects.filter(pk=pk).values_list("username")

    query = CompiledQuery(usernames, -1)
    with CaptureQueriesContext(connection) as captured:
        answers = [query.rows(cast[name].pk) for name in ("uma", "vic", "alice")]
    assert answers == [[("uma",)], [("vic",)], [("alice",)]]
    assert built == [-1] and len(captured) == 3


def test_queries_sent_together_answer_what_each_answers_alone(cast):
    """rows_together (on PostgreSQL sent in psycopg's pipeline mode) answers each query's own rows, in order."""
    usernames = CompiledQuery(lambda pk: User.objects.filter(pk=pk).values_list("username"), -1)
    together = rows_together((MEMBERSHIPS, (cast["vic"].pk, "alpha")), (usernames, (cast["uma"].pk,)),
                             (usernames, (-5,)))
    assert together == [MEMBERSHIPS.rows(cast["vic"].pk, "alpha"), [("uma",)], []]
    assert isinstance(together[0][0][1], dt.datetime)  # each query's converters still apply


def test_a_failing_query_sent_together_raises_and_leaves_the_connection_usable(cast):
    from django.db import DatabaseError, transaction

    failing = CompiledQuery(lambda pk: User.objects.filter(pk=pk).extra(where=["1 / (id - id) = 1"])
                            .values_list("pk"), -1)
    usernames = CompiledQuery(lambda pk: User.objects.filter(pk=pk).values_list("username"), -2)
    if connection.vendor == "postgresql":  # SQLite divides by zero into NULL
        with pytest.raises(DatabaseError), transaction.atomic():
            rows_together((usernames, (cast["uma"].pk,)), (failing, (cast["uma"].pk,)))
    assert usernames.rows(cast["vic"].pk) == [("vic",)]


def test_a_datetime_argument_is_compared_as_the_queryset_compares_it(cast):
    """A datetime sample is found as the backend adapts it (text on SQLite), and each call's
    datetime is adapted the same way."""
    created = CompiledQuery(lambda project_id, after: Membership.objects.filter(
        project__project_id=project_id, project__created__gte=after).values_list("role").order_by("role"),
        "\x00project", dt.datetime(1999, 9, 9, tzinfo=dt.UTC))
    made = Membership.objects.filter(project__project_id="alpha").values_list("project__created")[0][0]
    for after in (made, made + dt.timedelta(microseconds=1), made - dt.timedelta(days=1)):
        expected = list(Membership.objects.filter(project__project_id="alpha", project__created__gte=after)
                        .values_list("role").order_by("role"))
        assert created.rows("alpha", after) == expected
    assert created.rows("alpha", made) and not created.rows("alpha", made + dt.timedelta(microseconds=1))


def test_a_lookup_that_transforms_its_argument_is_refused():
    contains = CompiledQuery(lambda name: User.objects.filter(username__contains=name).values_list("pk"), "\x00name")
    with pytest.raises(ValueError, match="not a parameter"):
        contains.rows("uma")


def test_samples_must_differ():
    with pytest.raises(ValueError, match="distinct"):
        CompiledQuery(lambda a, b: User.objects.filter(pk=a, id=b).values_list("pk"), -1, -1)


def new_job(cast, now) -> CustomJob:
    return CustomJob(project=cast["alpha"], location="us-central1", job_id="123456789012345678", display_name="j",
                     spec={"jobSpec": {"workerPoolSpecs": []}}, labels={"team": "a"}, strategy="STANDARD",
                     timeout_seconds=3600, created_by=cast["uma"], create_time=now, update_time=now)


def test_a_compiled_insert_saves_the_row_save_would(cast, now):
    job = new_job(cast, now)
    CompiledInsert(CustomJob).save(job)
    assert job.pk is not None and not job._state.adding and job._state.db == "default"
    stored = CustomJob.objects.get(pk=job.pk)
    assert (stored.job_id, stored.spec, stored.labels, stored.create_time, stored.created_by_id, stored.state) == (
        job.job_id, job.spec, job.labels, now, cast["uma"].pk, job.state)


def test_it_applies_field_pre_save_and_sends_the_save_signals(cast):
    seen = []

    def record(sender, instance, **kwargs):
        seen.append((kwargs.get("created"), instance.pk is None))

    pre_save.connect(record, sender=ApiToken)
    post_save.connect(record, sender=ApiToken)
    try:
        token = ApiToken(user=cast["vic"])
        CompiledInsert(ApiToken).save(token)
    finally:
        pre_save.disconnect(record, sender=ApiToken)
        post_save.disconnect(record, sender=ApiToken)
    assert seen == [(None, True), (True, False)]
    assert ApiToken.objects.get(pk=token.pk).created == token.created is not None  # auto_now_add


def test_it_refuses_a_saved_instance(cast, now):
    job = new_job(cast, now)
    job.save()
    with pytest.raises(ValueError, match="already saved"):
        CompiledInsert(JobEvent).save(JobEvent.objects.create(job=job, time=now))


def test_save_with_inserts_a_row_and_the_row_pointing_at_it(cast, now):
    job, event = new_job(cast, now), JobEvent(time=now, state="JOB_STATE_QUEUED", message="created")
    with CaptureQueriesContext(connection) as captured:
        CompiledInsert(CustomJob).save_with(job, event, CompiledInsert(JobEvent))
    assert job.pk is not None and event.pk is not None and event.job_id == job.pk and event.job is job
    assert not job._state.adding and not event._state.adding
    assert list(CustomJob.objects.get(pk=job.pk).events.values_list("pk", "message")) == [(event.pk, "created")]
    if connection.vendor == "postgresql":  # one statement, which commits by itself outside a transaction
        assert [query["sql"].split(None, 1)[0] for query in captured.captured_queries] == ["WITH"]


def test_save_with_inserts_neither_row_when_the_second_is_refused(cast, now):
    from django.db import IntegrityError, transaction

    job, event = new_job(cast, now), JobEvent(time=now, state="JOB_STATE_QUEUED", message=None)  # NOT NULL
    with pytest.raises(IntegrityError), transaction.atomic():
        CompiledInsert(CustomJob).save_with(job, event, CompiledInsert(JobEvent))
    assert not CustomJob.objects.filter(job_id=job.job_id).exists()


def test_save_with_needs_exactly_one_foreign_key_to_the_first_model(cast, now):
    with pytest.raises(ValueError, match="exactly one foreign key"):
        CompiledInsert(CustomJob).save_with(new_job(cast, now), ApiToken(user=cast["vic"]), CompiledInsert(ApiToken))


def test_a_value_json_cannot_carry_is_refused_not_misread():
    from trainhub.common.compiled import _text_input

    assert _text_input(float("-inf")) == "-Infinity" and _text_input(dt.date(2026, 12, 5)) == "2026-12-05"
    with pytest.raises(TypeError, match="timedelta"):
        _text_input(dt.timedelta(days=1))
    with pytest.raises(TypeError, match="bytes"):
        _text_input(b"\x00")


def test_instances_from_a_joined_row_are_what_the_orm_reads(cast):
    membership = Membership.objects.filter(user=cast["vic"]).select_related("project", "user").first()
    joined = CompiledQuery(lambda pk: Membership.objects.filter(pk=pk).values_list(
        *field_names(Membership), *(f"project__{name}" for name in field_names(type(membership.project))),
        *(f"user__{name}" for name in field_names(User))), -1)

    made, project, user = instances(joined.rows(membership.pk)[0], Membership, type(membership.project), User)

    assert (made.pk, made.role, made.project_id) == (membership.pk, membership.role, membership.project_id)
    assert (project.project_id, project.created) == (membership.project.project_id, membership.project.created)
    assert (user.username, user.is_active) == (membership.user.username, membership.user.is_active)
    assert not made._state.adding  # saved rows, as from_db marks them
