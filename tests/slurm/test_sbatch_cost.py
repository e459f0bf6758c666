"""What one sbatch over REST reads (issue 21): the job's partition and its nodes' facts, the user's
association chain and the QOS - never the whole cluster - in a number of SQL statements that does
not grow with the cluster's jobs, users or associations."""

import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.slurm.conftest import make_job, sbatch
from trainhub.slurm.sbatch import parse_options
from trainhub.slurm.services.accounting import account_add, user_add


def _statements(api, user: str = "uma", *options: str) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        response = sbatch(api, user, *options, "-t", "10", "--wrap", "hostname")
    assert response.status_code == 200, response.content
    return [query["sql"] for query in captured.captured_queries]


def test_an_sbatch_costs_the_same_statements_however_big_the_cluster(api, accounts, now):
    _statements(api)  # the first request also reads what every request caches (the token's statement)
    small = _statements(api)
    for number in range(30):
        account_add(cluster=accounts, name=f"team{number}", actor="test", now=now)
        user_add(cluster=accounts, name=f"user{number}", accounts=[f"team{number}"], actor="test", now=now)
    for _ in range(50):
        make_job(accounts, user="alice")
    big = _statements(api)
    assert len(big) == len(small)
    reads = [sql for sql in big if sql.startswith(("SELECT", "WITH"))]
    # The user's associations and their ancestors, not the cluster's; the named partition; no queue.
    assert all("'uma'" in sql for sql in reads if 'FROM "slurm_association"' in sql)
    assert all("'a4'" in sql for sql in reads if 'FROM "slurm_partition" ' in sql)
    assert not any('FROM "slurm_slurmjob"' in sql for sql in reads)


def test_every_statement_an_sbatch_sends_is_short_enough_for_psycopg_to_keep_its_conversion(api, accounts):
    """psycopg converts a statement's ``%s`` placeholders to PostgreSQL's ``$n`` and keeps the result only
    for statements of up to 4,096 bytes (``MAX_CACHED_STATEMENT_LENGTH``): the job-and-event INSERT
    went over it (4,237 bytes) and was converted anew on every sbatch, 3-4 % of sbatch's CPU."""
    sent: list[str] = []

    def record(execute, sql, params, many, context):
        sent.append(sql)
        return execute(sql, params, many, context)

    _statements(api)
    with connection.execute_wrapper(record):
        _statements(api)
    assert sent and max(len(sql.encode()) for sql in sent) <= 4096


def test_a_priority_basic_sbatch_gives_its_priority_in_the_same_statements(api, accounts, now):
    """priority/basic's FIFO value (0xffff0000 less the values given so far, which its jobs count
    down) is written with the job, in the statement that takes its id: no statement more than a
    multifactor sbatch, and no pass needed."""
    from trainhub.slurm.models import SlurmJob
    from trainhub.slurm.services.clusters import cluster_config_set

    _statements(api)
    multifactor = _statements(api)
    cluster_config_set(cluster=accounts, changes={"PriorityType": "priority/basic"}, actor="test", now=now)
    _statements(api)
    assert len(_statements(api)) == len(multifactor)
    job = SlurmJob.objects.filter(cluster=accounts).latest("job_id")
    # the multifactor jobs before took no FIFO value: the second job under priority/basic takes the second
    assert (job.priority, job.fifo_priority, job.priority_time is not None) == (0xFFFF0000 - 2, 0xFFFF0000 - 2, True)


def test_an_administrators_sbatch_reads_the_membership_once_and_takes_its_job_id_as_it_writes_the_job(api, accounts,
                                                                                                        admin):
    _statements(api, "alice")
    statements = _statements(api, "alice")  # a platform administrator: sbatch asks whether they may --nice < 0
    assert sum('FROM "iam_membership"' in sql for sql in statements) == 1  # with the token, not again
    verbs = [sql.split()[0] for sql in statements]
    if connection.vendor == "postgresql":
        # The id is taken in the statement that writes the job and its event: the cluster's counter
        # row is locked only while it runs, with no transaction of sbatch's around it.
        assert [verb for verb, sql in zip(verbs, statements, strict=True) if "slurm_slurmcluster" in sql] == [
            "SELECT", "WITH"]
        written = verbs.index("WITH")
        assert all(table in statements[written]
                   for table in ('UPDATE "slurm_slurmcluster"', '"slurm_slurmjob"', '"slurm_jobevent"'))
        assert verbs[:written].count("SAVEPOINT") == verbs[:written].count("RELEASE")  # no transaction around it
    else:
        taken = verbs.index("UPDATE")
        assert verbs[taken - 1:taken + 3] == ["SAVEPOINT", "UPDATE", "INSERT", "INSERT"]


def test_a_submit_count_limit_still_counts_other_users_jobs_under_the_account(api, accounts, now):
    from trainhub.slurm.models import Association

    Association.objects.filter(cluster=accounts, user="", account__name="ml").update(settings={"grp_submit_jobs": 2})
    make_job(accounts, user="alice")
    assert sbatch(api, "uma", "--wrap", "x").status_code == 200
    refused = sbatch(api, "uma", "--wrap", "x")
    assert refused.status_code == 400
    assert "Job violates accounting/QOS policy" in refused.json()["error"]["message"]



def test_the_default_account_is_read_only_when_sbatch_names_none(api, accounts):
    _statements(api)
    default_read = [sql for sql in _statements(api) if 'FROM "slurm_slurmuser"' in sql]
    named = _statements(api, "uma", "-A", "ml")
    assert len(default_read) == 1 and not any('FROM "slurm_slurmuser"' in sql for sql in named)


def test_a_job_written_with_its_event_takes_the_next_id_in_the_same_statement_or_none(cluster, admin, now):
    """CompiledInsert.save_with numbered by the cluster's counter: both rows and the id, or nothing."""
    from django.db import IntegrityError, transaction

    from trainhub.common.compiled import CompiledInsert
    from trainhub.slurm.models import JobEvent, SlurmCluster, SlurmJob
    from trainhub.slurm.services.clusters import JOB_IDS
    from trainhub.slurm.services.lifecycle import EVENT_INSERT

    def write(message, top=1000):
        job = SlurmJob(cluster=cluster, name="wrap", submitted_by=admin, user_name="alice", partition="a4",
                       submit_time=now, begin_time=now)
        CompiledInsert(SlurmJob).save_with(job, JobEvent(time=now, message=message), EVENT_INSERT, numbered_by=(
            JOB_IDS, cluster.pk, ("job_id", "array_job_id", ("priority", top))))
        return job

    first, given = SlurmCluster.objects.values_list("next_job_id", "fifo_priorities").get(pk=cluster.pk)
    job = write("queued")
    # counted down from 1000 by the cluster's fifo_priorities, one more
    assert (job.job_id, job.array_job_id, job.priority) == (first, first, 1000 - given - 1)
    assert SlurmJob.objects.filter(pk=job.pk, job_id=first, array_job_id=first, priority=1000 - given - 1).exists()
    assert list(JobEvent.objects.filter(job=job).values_list("message", flat=True)) == ["queued"]
    with pytest.raises(IntegrityError), transaction.atomic():
        write(None)  # the event's message is NOT NULL
    assert SlurmCluster.objects.values_list("next_job_id", "fifo_priorities").get(pk=cluster.pk) == (
        first + 1, given + 1)
    following = write("next", top=5000)  # another top: the same statement, its own value
    assert (following.job_id, following.priority) == (first + 1, 5000 - given - 2)
    assert SlurmJob.objects.get(pk=following.pk).priority == 5000 - given - 2
    uncounted = CompiledInsert(SlurmJob)  # a job with no field counted down does not count down
    uncounted.save_with(SlurmJob(cluster=cluster, name="wrap", submitted_by=admin, user_name="alice", partition="a4",
                                 submit_time=now, begin_time=now), JobEvent(time=now, message="held"), EVENT_INSERT,
                        numbered_by=(JOB_IDS, cluster.pk, ("job_id",)))
    assert SlurmCluster.objects.values_list("next_job_id", "fifo_priorities").get(pk=cluster.pk) == (
        first + 3, given + 2)


def test_a_job_written_by_the_compiled_insert_reads_back_as_one_the_orm_saved(cluster, admin, now):
    """On PostgreSQL its values travel as one JSON row (json_populate_record); every kind of value
    of a job's fields must come back as Model.save() stores it."""
    from django.forms.models import model_to_dict

    from trainhub.common.compiled import CompiledInsert
    from trainhub.slurm.models import JobEvent, SlurmJob
    from trainhub.slurm.services.clusters import JOB_IDS
    from trainhub.slurm.services.lifecycle import EVENT_INSERT

    def job(job_id):
        return SlurmJob(
            cluster=cluster, job_id=job_id, array_job_id=job_id, name='q"uote\\back\nline \u00e9\U0001f600',
            submitted_by=admin, user_name="alice", partition="a4", submit_time=now,
            begin_time=now + dt.timedelta(microseconds=123457), end_time=None, requeue=False, time_limit=0,
            script="#!/bin/sh\n\techo 'x' \"$1\"\n", script_args=["a b", {"k": [1, 2.5, None, True]}, ""],
            factor_age=float("inf"), factor_fairshare=1e-300, factor_partition=-0.0, factor_qos=0.1 + 0.2)

    saved, compiled = job(900001), job(900002)
    saved.save()
    CompiledInsert(SlurmJob).save_with(compiled, JobEvent(time=now, message="queued"), EVENT_INSERT,
                                       numbered_by=(JOB_IDS, cluster.pk, ("job_id", "array_job_id")))
    ignored = ("id", "job_id", "array_job_id")
    stored = [model_to_dict(SlurmJob.objects.get(pk=row.pk), exclude=ignored) for row in (saved, compiled)]
    assert stored[1] == stored[0]
    assert stored[1]["factor_age"] == float("inf") and stored[1]["begin_time"] == now + dt.timedelta(microseconds=123457)


def test_an_sbatch_reads_its_options_once(api, accounts, monkeypatch):
    """job_submit and the answer's message (``Submitted batch job N``) share one parse of the command
    line and the script's #SBATCH lines."""
    from trainhub.slurm.services import jobs

    parsed = []
    monkeypatch.setattr(jobs, "parse_options", lambda argv: parsed.append(argv) or parse_options(argv))
    response = sbatch(api, "uma", "-t", "10", "--wrap", "hostname")
    assert response.status_code == 200 and response.json()["message"].startswith("Submitted batch job ")
    assert len(parsed) == 1
