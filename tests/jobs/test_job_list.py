"""The job list: Active and Finished tabs, filters, search, sorting, keyset pages, live rows."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.conftest import container_pool, later
from tests.jobs.test_views import submit
from trainhub.iam.roles import USER
from trainhub.iam.services import membership_set
from trainhub.jobs import services, states
from trainhub.jobs.models import CustomJob
from trainhub.jobs.page_selectors import FINISHED_TAB, TABS, JobQuery, jobs_page

pytestmark = pytest.mark.django_db

LIST = reverse("jobs:list")
ROWS = reverse("jobs:list_rows")


def listed(client, **params) -> list[str]:
    response = client.get(LIST, params)
    assert response.status_code == 200
    return [job.display_name for job in response.context["jobs"]]


def finish(job: CustomJob, at, state=states.FAILED) -> CustomJob:
    if state == states.CANCELLED:
        services.job_cancel(job=job, now=at)
    else:
        services.job_fail(job=job, now=at, code=services.CODE_INTERNAL, message="stopped by the test")
    job.refresh_from_db()
    return job


# Tabs ---------------------------------------------------------------------------------------

def test_active_and_finished_jobs_are_listed_on_separate_tabs(client, cast, now):
    submit(cast["alpha"], cast["uma"], name="still-queued")
    finish(submit(cast["alpha"], cast["uma"], name="already-failed"), now)
    client.force_login(cast["uma"])
    assert listed(client) == ["still-queued"]
    assert listed(client, tab="active") == ["still-queued"]
    assert listed(client, tab="finished") == ["already-failed"]


def test_a_finished_state_in_the_link_opens_the_finished_tab(client, cast, now):
    finish(submit(cast["alpha"], cast["uma"], name="cancelled-one"), now, states.CANCELLED)
    submit(cast["alpha"], cast["uma"], name="queued-one")
    client.force_login(cast["uma"])
    response = client.get(LIST, {"state": states.CANCELLED})
    assert response.context["tab"] is FINISHED_TAB
    assert [job.display_name for job in response.context["jobs"]] == ["cancelled-one"]


def test_the_active_tab_counts_its_matches_and_the_finished_tab_does_not(client, cast, now):
    for _ in range(3):
        submit(cast["alpha"], cast["uma"])
    finish(submit(cast["alpha"], cast["uma"]), now)
    client.force_login(cast["uma"])
    active = client.get(LIST)
    assert active.context["page"].total == 3
    assert 'id="tab-count-active">3</span>' in active.content.decode()
    assert client.get(LIST, {"tab": "finished"}).context["page"].total is None


def test_the_database_refuses_a_finished_state_without_an_end_time(cast):
    job = submit(cast["alpha"], cast["uma"])
    with pytest.raises(IntegrityError), transaction.atomic():
        CustomJob.objects.filter(pk=job.pk).update(state=states.SUCCEEDED)
    with pytest.raises(IntegrityError), transaction.atomic():
        CustomJob.objects.filter(pk=job.pk).update(end_time=job.create_time)


# Access -------------------------------------------------------------------------------------

def test_it_lists_only_jobs_of_the_users_projects(client, cast):
    submit(cast["alpha"], cast["uma"], name="alpha-training")
    submit(cast["beta"], cast["mallory"], name="beta-training")
    client.force_login(cast["mallory"])
    assert listed(client) == ["beta-training"]
    client.force_login(cast["vic"])
    assert listed(client) == ["alpha-training"]


def test_a_project_the_user_is_not_in_is_a_filter_error_not_a_leak(client, cast):
    submit(cast["beta"], cast["mallory"], name="beta-secret")
    client.force_login(cast["alice"])
    response = client.get(LIST, {"project": "beta"})
    assert response.status_code == 200
    assert b"Select a valid choice" in response.content
    assert b"beta-secret" not in response.content


def test_a_job_shows_its_submitter_even_after_they_left_the_project(client, cast):
    from trainhub.iam.models import Membership

    submit(cast["alpha"], cast["alice"], name="by-alice")
    Membership.objects.filter(user=cast["alice"]).delete()
    client.force_login(cast["uma"])
    content = client.get(LIST).content.decode()
    assert '<td class="col-wide">alice</td>' in content


def test_the_user_filter_offers_only_members_of_the_users_projects(client, cast):
    client.force_login(cast["uma"])
    choices = [value for value, _ in client.get(LIST).context["filter_form"].fields["user"].choices]
    assert choices == ["", "uma", "alice", "vic"]
    assert "mallory" not in choices


# Filters and search -------------------------------------------------------------------------

def test_it_filters_by_project_user_state_gpu_type_and_strategy(client, cast):
    membership_set(project=cast["beta"], user=cast["uma"], role=USER)
    t4 = container_pool(accelerator="NVIDIA_TESLA_T4", count=2)
    submit(cast["alpha"], cast["uma"], t4, name="uma-t4")
    submit(cast["alpha"], cast["alice"], container_pool(), name="alice-cpu")
    submit(cast["beta"], cast["uma"], container_pool(machine_type="a3-highgpu-8g"), name="uma-h100-spot",
           scheduling={"strategy": "SPOT"})
    client.force_login(cast["uma"])
    assert listed(client, project="beta") == ["uma-h100-spot"]
    assert listed(client, user="uma") == ["uma-h100-spot", "uma-t4"]
    assert listed(client, user="alice") == ["alice-cpu"]
    assert listed(client, accelerator_type="NVIDIA_TESLA_T4") == ["uma-t4"]
    assert listed(client, accelerator_type="NVIDIA_H100_80GB") == ["uma-h100-spot"]
    assert listed(client, accelerator_type="ACCELERATOR_TYPE_UNSPECIFIED") == ["alice-cpu"]
    assert listed(client, strategy="SPOT") == ["uma-h100-spot"]
    assert listed(client, state=states.QUEUED, strategy="STANDARD", user="uma") == ["uma-t4"]


def test_search_matches_the_start_of_the_name_in_any_case_or_the_exact_job_id(client, cast):
    bert = submit(cast["alpha"], cast["uma"], name="BERT-large")
    submit(cast["alpha"], cast["uma"], name="tiny-bert")
    client.force_login(cast["uma"])
    assert listed(client, q="bert") == ["BERT-large"]
    assert listed(client, q=" Bert-L ") == ["BERT-large"]
    assert listed(client, q=bert.job_id) == ["BERT-large"]
    assert listed(client, q=bert.job_id[:-1]) == []
    assert listed(client, q="%") == []  # a LIKE wildcard is searched for, not used


def test_a_search_with_no_match_says_so(client, cast):
    submit(cast["alpha"], cast["uma"], name="resnet")
    client.force_login(cast["uma"])
    assert "No active jobs match these filters." in client.get(LIST, {"q": "vit"}).content.decode()


# Sorting and pages --------------------------------------------------------------------------

def test_the_active_tab_is_newest_first_with_a_next_page_link_after_50_jobs(client, cast, now):
    for index in range(52):
        submit(cast["alpha"], cast["uma"], name=f"job-{index:02d}", now=later(now, index // 2))  # ties too
    client.force_login(cast["uma"])
    first = client.get(LIST)
    names = [job.display_name for job in first.context["jobs"]]
    assert len(names) == 50 and names[:2] == ["job-51", "job-50"]
    cursor = first.context["next_cursor"]
    assert f"cursor={cursor}" in first.content.decode()
    second = client.get(LIST, {"cursor": cursor})
    assert [job.display_name for job in second.context["jobs"]] == ["job-01", "job-00"]
    assert second.context["next_cursor"] == ""


def test_queue_order_and_gpu_order_page_through_every_job_once(cast, now):
    jobs = [submit(cast["alpha"], cast["uma"], container_pool(accelerator="NVIDIA_TESLA_T4", count=(1, 2, 4)[i % 3]),
                   name=f"job-{i}", now=later(now, i // 3)) for i in range(9)]
    for key, expected in (("oldest", [j.display_name for j in jobs]),
                          ("gpus", [j.display_name for j in sorted(jobs, key=lambda j: (j.gpu_count, j.pk),
                                                                   reverse=True)])):
        assert pages_of(tab_key="active", sort=key, projects=[cast["alpha"]], size=4) == expected


def test_finished_jobs_page_by_end_time_both_ways(cast, now):
    jobs = [submit(cast["alpha"], cast["uma"], name=f"job-{i}") for i in range(7)]
    for index, job in enumerate(jobs):
        finish(job, later(now, index // 2))  # two jobs end in each second
    newest_end_first = [j.display_name for j in sorted(jobs, key=lambda j: (j.end_time, j.pk), reverse=True)]
    assert pages_of(tab_key="finished", sort="ended", projects=[cast["alpha"]], size=3) == newest_end_first
    assert pages_of(tab_key="finished", sort="ended-first", projects=[cast["alpha"]],
                    size=3) == newest_end_first[::-1]


def pages_of(*, tab_key: str, sort: str, projects, size: int) -> list[str]:
    """Every job's name, reading page after page by keyset."""
    tab = TABS[tab_key]
    ordering = tab.sort(sort).ordering
    names, cursor = [], None
    while True:
        page = jobs_page(JobQuery(tab=tab, projects=projects, sort=tab.sort(sort),
                                  cursor=ordering.decode(cursor) if cursor else None), usernames={}, size=size)
        names += [job.display_name for job in page.jobs]
        if not page.next_cursor:
            return names
        cursor = page.next_cursor


def test_sortable_headers_link_to_the_other_direction_and_mark_the_current_order(client, cast):
    submit(cast["alpha"], cast["uma"])
    client.force_login(cast["uma"])
    content = client.get(LIST).content.decode()
    assert 'aria-sort="descending"><a href="?sort=oldest"' in content
    content = client.get(LIST, {"sort": "oldest"}).content.decode()
    assert 'aria-sort="ascending"><a href="?sort=newest"' in content


def test_a_forged_cursor_is_reported_instead_of_failing(client, cast):
    client.force_login(cast["uma"])
    for cursor in ("not-a-cursor", "WzEsIDJd", "W3RydWUsIDFd"):  # garbage, [1, 2] for a time, [true, 1]
        response = client.get(LIST, {"cursor": cursor})
        assert response.status_code == 200
        assert b"not a link from a previous page" in response.content


# Cost ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("params", [{}, {"tab": "finished"}, {"tab": "finished", "user": "uma", "q": "job"},
                                    {"state": states.QUEUED, "accelerator_type": "NVIDIA_TESLA_T4", "sort": "gpus"}])
def test_a_page_runs_as_many_queries_for_30_jobs_as_for_3(client, cast, now, params, django_assert_max_num_queries):
    def add(count):  # each time one more active and one more finished T4 job of uma's
        for _ in range(count):
            t4 = container_pool(accelerator="NVIDIA_TESLA_T4", count=1)
            submit(cast["alpha"], cast["uma"], t4, name="job-active")
            finish(submit(cast["alpha"], cast["uma"], t4, name="job-finished"), now)

    add(3)
    client.force_login(cast["uma"])
    with CaptureQueriesContext(connection) as few:
        client.get(LIST, params)
    add(27)
    with django_assert_max_num_queries(len(few)):
        response = client.get(LIST, params)
    assert len(response.context["jobs"]) == 30


def query_plan(queryset) -> str:
    """The plan the database picks, with full scans and sorts priced out on PostgreSQL so that
    the plan shows whether an index can serve the query at all (small test tables would
    otherwise always be scanned)."""
    sql, params = queryset.query.sql_with_params()
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            for setting in ("enable_seqscan", "enable_sort", "enable_bitmapscan"):
                cursor.execute(f"SET LOCAL {setting} = off")
            cursor.execute(f"EXPLAIN {sql}", params)
        else:
            cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        return "\n".join(" ".join(str(part) for part in row) for row in cursor.fetchall())


@pytest.mark.parametrize("tab_key, sort, columns, index", [
    ("active", "newest", {}, "job_active_created"),
    ("active", "gpus", {}, "job_active_gpus"),
    ("active", "oldest", {}, "job_active_created"),
    ("finished", "ended", {}, "job_finished_"),
    ("finished", "ended-first", {}, "job_finished_"),
    ("finished", "ended", {"created_by_id": 1}, "job_finished_"),
    ("finished", "ended", {"state": states.FAILED, "accelerator_type": "NVIDIA_H100_80GB"}, "job_finished_"),
])
def test_each_tab_and_order_is_served_by_an_index_of_that_tab_alone(cast, tab_key, sort, columns, index):
    tab = TABS[tab_key]
    query = JobQuery(tab=tab, projects=[cast["alpha"]], sort=tab.sort(sort), columns=columns)
    plan = query_plan(query.queryset().order_by(*tab.sort(sort).ordering.order_by())[:51])
    assert index in plan, plan
    assert "TEMP B-TREE" not in plan and "Sort" not in plan.replace("Sort Key", ""), plan


def test_search_by_name_prefix_is_served_by_an_index(db):
    plan = query_plan(CustomJob.objects.filter(display_name__istartswith="bert").values("pk"))
    assert "job_name_prefix" in plan, plan


# Live rows ----------------------------------------------------------------------------------

def test_the_first_page_refreshes_its_rows_with_the_same_filters_and_later_pages_do_not(client, cast, now):
    for index in range(51):
        submit(cast["alpha"], cast["uma"], name="polled", now=later(now, index))
    client.force_login(cast["uma"])
    first = client.get(LIST, {"state": states.QUEUED})
    assert f'hx-get="{ROWS}?state={states.QUEUED}" hx-trigger="th-changed from:body"' in first.content.decode()
    rows = client.get(ROWS, {"state": states.QUEUED})
    assert rows.status_code == 200
    assert "polled" in rows.content.decode()
    assert b"<html" not in rows.content and b"<table" not in rows.content
    assert b'id="tab-count-active" hx-swap-oob="true">51</span>' in rows.content
    second = client.get(LIST, {"state": states.QUEUED, "cursor": first.context["next_cursor"]})
    assert b"th-changed" not in second.content
