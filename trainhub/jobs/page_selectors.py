"""Reads the browser pages need beyond the API's selectors. Each one runs a fixed number of
queries, however many rows it returns."""

from __future__ import annotations

import datetime as dt

from trainhub.iam.models import Project
from trainhub.jobs.models import CustomJob, LogLine

# The API's keyset pagination, so a page cursor and an API pageToken are the same thing.
from trainhub.jobs.selectors import keyset_page

JOB_PAGE_SIZE = 50
LOG_TAIL_LINES = 500




def jobs_page(*, projects: list[Project], state: str = "", cursor: tuple[dt.datetime, int] | None = None,
              size: int = JOB_PAGE_SIZE) -> tuple[list[CustomJob], str]:
    """Jobs of ``projects``, newest first, keyset-paginated on (create_time, id) like selectors.jobs_list.

    Returns the page and the cursor of the next page ("" on the last page).
    """
    jobs = CustomJob.objects.filter(project__in=projects).select_related("project")
    if state:
        jobs = jobs.filter(state=state)
    return keyset_page(jobs, cursor=cursor, size=size)


def job_log_tail(*, job: CustomJob, after: int = 0, task: tuple[int, int] | None = None,
                 limit: int = LOG_TAIL_LINES) -> list[LogLine]:
    """The newest ``limit`` log lines with an id above ``after``, oldest first.

    ``task`` is (pool index, replica index) to show one task's output only.
    """
    lines = LogLine.objects.filter(job=job, id__gt=after).select_related("replica")
    if task:
        lines = lines.filter(replica__pool_index=task[0], replica__replica_index=task[1])
    newest = list(lines.order_by("-id")[:limit])
    return newest[::-1]
