"""Reads for the jobs API and pages. Every job lookup also checks the user's permission."""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import DateTimeField, Prefetch, Q, QuerySet

from trainhub.common.errors import ApiError, FieldViolation, invalid_argument
from trainhub.common.wire import format_timestamp, parse_timestamp
from trainhub.iam.models import Project
from trainhub.iam.selectors import project_get_for_user
from trainhub.jobs.filtering import Clause, FilterError, parse_filter
from trainhub.jobs.models import CustomJob, JobEvent, LogLine, Replica, current_replicas

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500


def _with_replicas(jobs: QuerySet[CustomJob]) -> QuerySet[CustomJob]:
    return jobs.select_related("project").prefetch_related(
        Prefetch("replicas", queryset=Replica.objects.select_related("node").order_by("pool_index", "replica_index"))
    )


def job_get_for_user(*, user: AbstractBaseUser, project_id: str, location: str, job_id: str,
                     permission: str) -> CustomJob:
    project = project_get_for_user(user=user, project_id=project_id, permission=permission)
    job = (
        CustomJob.objects.select_related("project")
        .filter(project=project, location=location, job_id=job_id)
        .first()
    )
    if job is None:
        raise ApiError(404, f"CustomJob projects/{project_id}/locations/{location}/customJobs/{job_id} not found.")
    return job


def job_replicas(*, job: CustomJob) -> list[Replica]:
    """The replicas of the job's latest attempt, the latest restart of each task, in task order."""
    return current_replicas(job.replicas.filter(attempt=job.restart_count).select_related("node__pool"),
                            job.restart_count)


def job_events(*, job: CustomJob) -> QuerySet[JobEvent]:
    return job.events.order_by("time", "id")


def _clause_q(clause: Clause) -> Q:
    if clause.field == "display_name":
        if clause.op == ":":
            pattern = "^" + ".*".join(re.escape(part) for part in str(clause.value).split("*")) + "$"
            return Q(display_name__regex=pattern)
        q = Q(display_name=clause.value)
    elif clause.field == "state":
        q = Q(state=clause.value)
    elif clause.field == "create_time":
        lookup = {"=": "", "!=": "", "<": "__lt", "<=": "__lte", ">": "__gt", ">=": "__gte"}[clause.op]
        q = Q(**{f"create_time{lookup}": clause.value})
    else:
        key = clause.field.removeprefix("labels.")
        if clause.op == ":":
            return Q(labels__has_key=key)
        q = Q(**{f"labels__{key}": clause.value})
    return ~q if clause.op == "!=" else q


@dataclass(frozen=True)
class Ordering:
    """A keyset order: one column then the id as tie-breaker, both in the same direction."""

    field: str
    descending: bool = True

    def order_by(self) -> tuple[str, str]:
        sign = "-" if self.descending else ""
        return f"{sign}{self.field}", f"{sign}id"

    def after(self, value: Any, pk: int) -> Q:
        """Rows that come after (value, pk) in this order.

        The redundant bound on the column alone is what the database turns into an index range;
        the OR that follows only settles ties (without it PostgreSQL would walk the index from
        the start and filter, making deep pages slow).
        """
        beyond, bound = ("lt", "lte") if self.descending else ("gt", "gte")
        return Q(**{f"{self.field}__{bound}": value}) & (
            Q(**{f"{self.field}__{beyond}": value}) | Q(**{self.field: value, f"pk__{beyond}": pk}))

    def _is_time(self) -> bool:
        return isinstance(CustomJob._meta.get_field(self.field), DateTimeField)

    def encode(self, job: CustomJob) -> str:
        value = getattr(job, self.field)
        payload = json.dumps([format_timestamp(value) if self._is_time() else value, job.pk]).encode()
        return base64.urlsafe_b64encode(payload).decode().rstrip("=")

    def decode(self, token: str) -> tuple[Any, int]:
        try:
            padded = token + "=" * (-len(token) % 4)
            value, pk = json.loads(base64.urlsafe_b64decode(padded.encode()))
            if self._is_time():
                value = parse_timestamp(value)
            elif not isinstance(value, (int, str)) or isinstance(value, bool):
                raise TypeError(f"a {type(value).__name__} cannot be a position in {self.field}")
            return value, int(pk)
        except (ValueError, TypeError) as exc:
            raise invalid_argument([FieldViolation("pageToken", "is not a token returned by a previous list call")]) from exc


#: customJobs.list's order, and its pageToken's.
NEWEST_FIRST = Ordering("create_time")


def jobs_list(*, project: Project, location: str, filter_expression: str = "", page_size: int | None = None,
              page_token: str = "") -> tuple[list[CustomJob], str]:
    """Newest first, keyset-paginated on (create_time, id) so deep pages stay cheap."""
    size = DEFAULT_PAGE_SIZE if not page_size else min(page_size, MAX_PAGE_SIZE)
    jobs = CustomJob.objects.filter(project=project, location=location)
    if filter_expression:
        try:
            clauses = parse_filter(filter_expression)
        except FilterError as exc:
            raise invalid_argument([FieldViolation("filter", str(exc))]) from exc
        for clause in clauses:
            jobs = jobs.filter(_clause_q(clause))
    cursor = NEWEST_FIRST.decode(page_token) if page_token else None
    return keyset_page(_with_replicas(jobs), cursor=cursor, size=size)


def keyset_page(jobs: QuerySet[CustomJob], *, cursor: tuple[Any, int] | None, size: int,
                ordering: Ordering = NEWEST_FIRST) -> tuple[list[CustomJob], str]:
    """One page in ``ordering`` after ``cursor`` (an index range, however deep the page), and the
    next page's token ("" on the last page)."""
    if cursor:
        jobs = jobs.filter(ordering.after(*cursor))
    page = list(jobs.order_by(*ordering.order_by())[: size + 1])
    next_token = ordering.encode(page[size - 1]) if len(page) > size else ""
    return page[:size], next_token


def job_logs(*, job: CustomJob, after: int = 0, task_name: str = "", limit: int = 1000) -> list[LogLine]:
    lines = LogLine.objects.filter(job=job, id__gt=after).select_related("replica")
    if task_name:
        match = re.fullmatch(r"workerpool(\d)-(\d+)", task_name)
        if not match:
            raise invalid_argument([FieldViolation("taskName", "must look like workerpool0-0")])
        lines = lines.filter(replica__pool_index=int(match.group(1)), replica__replica_index=int(match.group(2)))
    return list(lines.order_by("id")[:limit])
