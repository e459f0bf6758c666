"""What one sbatch over REST reads (issue 21): the job's partition and its nodes' facts, the user's
association chain and the QOS - never the whole cluster - in a number of SQL statements that does
not grow with the cluster's jobs, users or associations."""

from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.slurm.conftest import make_job, sbatch
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



def test_an_administrators_sbatch_reads_the_membership_once_and_takes_its_job_id_before_writing_the_job(api, accounts,
                                                                                                        admin):
    _statements(api, "alice")
    statements = _statements(api, "alice")  # a platform administrator: sbatch asks whether they may --nice < 0
    assert sum('FROM "iam_membership"' in sql for sql in statements) == 1  # with the token, not again
    assert [sql.split()[0] for sql in statements if "slurm_slurmcluster" in sql] == ["SELECT", "UPDATE"]
    # The id is taken by one UPDATE outside the insert's transaction (the counter row is not held
    # while the job is written), then the job and its event are written together.
    verbs = [sql.split()[0] for sql in statements]
    taken = verbs.index("UPDATE")
    assert verbs[:taken].count("SAVEPOINT") == verbs[:taken].count("RELEASE")  # no transaction of sbatch's is open
    if connection.vendor == "postgresql":
        assert verbs[taken + 1:taken + 2] == ["WITH"] and "slurm_jobevent" in statements[taken + 1]
    else:
        assert verbs[taken + 1:taken + 4] == ["SAVEPOINT", "INSERT", "INSERT"]


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
