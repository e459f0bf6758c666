"""Reads the browser pages need beyond the API's selectors. Each one runs a fixed number of
queries, however many rows it returns.

The job list has two tabs that never read each other's rows: Active (at most some ten thousand
jobs) and Finished (millions over time). Each tab's orders are served by its own partial indexes
(see ``CustomJob.Meta``) and paginated by keyset, so page 1,000 costs what page 1 costs, and
finished jobs are never counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from django.contrib.auth import get_user_model
from django.db.models import Q

from trainhub.iam.models import Project
from trainhub.jobs import states
from trainhub.jobs.models import ACTIVE_JOBS, FINISHED_JOBS, CustomJob, LogLine

# The API's keyset pagination, so the same code pages the API and the pages.
from trainhub.jobs.selectors import Ordering, keyset_page

JOB_PAGE_SIZE = 50
LOG_TAIL_LINES = 500
#: What a job list row shows; the spec and labels documents stay in the database.
_ROW_COLUMNS = ("pk", "job_id", "display_name", "location", "state", "strategy", "accelerator_type", "gpu_count",
                "replica_count", "create_time", "start_time", "end_time", "project", "created_by")


@dataclass(frozen=True)
class Sort:
    key: str
    label: str
    ordering: Ordering


@dataclass(frozen=True)
class ListTab:
    key: str
    label: str
    condition: Q
    states: tuple[str, ...]
    sorts: tuple[Sort, ...]
    #: Whether the tab shows how many jobs match (cheap for active jobs only).
    counted: bool

    @property
    def default_sort(self) -> Sort:
        return self.sorts[0]

    def sort(self, key: str) -> Sort:
        return next((sort for sort in self.sorts if sort.key == key), self.default_sort)


ACTIVE_TAB = ListTab(
    "active", "Active", ACTIVE_JOBS, (states.QUEUED, states.PENDING, states.RUNNING, states.CANCELLING),
    (Sort("newest", "Newest first", Ordering("create_time")),
     Sort("oldest", "Oldest first (queue)", Ordering("create_time", descending=False)),
     Sort("gpus", "Most GPUs first", Ordering("gpu_count"))),
    counted=True)
FINISHED_TAB = ListTab(
    "finished", "Finished", FINISHED_JOBS, (states.SUCCEEDED, states.FAILED, states.CANCELLED),
    (Sort("ended", "Recently ended", Ordering("end_time")),
     Sort("ended-first", "Ended longest ago", Ordering("end_time", descending=False))),
    counted=False)
TABS: dict[str, ListTab] = {tab.key: tab for tab in (ACTIVE_TAB, FINISHED_TAB)}


def tab_for(*, key: str, state: str) -> ListTab:
    """The tab asked for; without one, the tab of the state asked for (a link to ?state=FAILED)."""
    if key in TABS:
        return TABS[key]
    return FINISHED_TAB if state in FINISHED_TAB.states else ACTIVE_TAB


@dataclass(frozen=True)
class JobQuery:
    tab: ListTab
    projects: list[Project]
    sort: Sort
    #: Equality filters: CustomJob column -> value.
    columns: dict[str, Any] = field(default_factory=dict)
    #: "Name starts with" (case-insensitive), or a job id.
    search: str = ""
    cursor: tuple[Any, int] | None = None

    def queryset(self):
        # One project is an equality, which the (project, order) indexes serve without sorting.
        projects = {"project": self.projects[0]} if len(self.projects) == 1 else {"project__in": self.projects}
        jobs = CustomJob.objects.filter(self.tab.condition, **projects, **self.columns)
        if self.search:
            matches = Q(display_name__istartswith=self.search)
            if self.search.isdigit():
                matches |= Q(job_id=self.search)
            jobs = jobs.filter(matches)
        return jobs


@dataclass(frozen=True)
class JobPage:
    jobs: list[CustomJob]
    next_cursor: str
    #: How many jobs match the filters, on counted tabs only.
    total: int | None


def jobs_page(query: JobQuery, *, usernames: Mapping[int, str], size: int = JOB_PAGE_SIZE) -> JobPage:
    """One page of the job list: 1 query, 1 more on the Active tab to count its matches, and 1
    more only if a job's submitter is no longer among ``usernames`` (user id -> username).

    The page is read from the jobs table alone, its project and submitter filled in from what
    the page already knows: a join would let the database start from the other table and sort
    every matching job instead of walking the tab's index.
    """
    if not query.projects:
        return JobPage([], "", 0 if query.tab.counted else None)
    jobs = query.queryset()
    total = jobs.count() if query.tab.counted else None
    page, next_cursor = keyset_page(jobs.only(*_ROW_COLUMNS), cursor=query.cursor, size=size,
                                    ordering=query.sort.ordering)
    projects = {project.pk: project for project in query.projects}
    missing = {job.created_by_id for job in page} - set(usernames) - {None}
    names = {**usernames, **dict(get_user_model().objects.filter(pk__in=missing).values_list("pk", "username"))
             } if missing else usernames
    for job in page:
        job.project = projects[job.project_id]
        job.submitter = names.get(job.created_by_id, "")
    return JobPage(page, next_cursor, total)


def job_submitters(*, projects: list[Project]) -> dict[str, int]:
    """Username -> user id of the members of ``projects``, for the job list's user filter."""
    return dict(get_user_model().objects.filter(memberships__project__in=projects).distinct()
                .order_by("username").values_list("username", "pk"))


@dataclass(frozen=True)
class LogRow:
    pk: int
    stream: str
    text: str
    pool_index: int
    replica_index: int

    @property
    def task_name(self) -> str:
        return f"workerpool{self.pool_index}-{self.replica_index}"


def job_log_tail(*, job: CustomJob, after: int = 0, task: tuple[int, int] | None = None,
                 limit: int = LOG_TAIL_LINES) -> list[LogRow]:
    """The newest ``limit`` log lines with an id above ``after``, oldest first, as plain rows
    (hundreds of model instances would cost more than the query).

    ``task`` is (pool index, replica index) to show one task's output only.
    """
    lines = LogLine.objects.filter(job=job, id__gt=after)
    if task:
        lines = lines.filter(replica__pool_index=task[0], replica__replica_index=task[1])
    newest = lines.order_by("-id").values_list("pk", "stream", "text", "replica__pool_index",
                                               "replica__replica_index")[:limit]
    return [LogRow(*row) for row in list(newest)[::-1]]
