"""Reads the browser pages need beyond the API's selectors. Each one runs a fixed number of
queries, however many rows it returns."""

from __future__ import annotations

import datetime as dt

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Prefetch, Q

from trainhub.iam.models import ApiToken, Project
from trainhub.iam.roles import role_grants
from trainhub.iam.selectors import memberships_for_user
from trainhub.inventory.models import Node, NodePool
from trainhub.inventory.selectors import node_pools_with_usage
from trainhub.jobs.models import CustomJob, LogLine, Replica
# The API's page-token codec, so a page cursor and an API pageToken are the same thing.
from trainhub.jobs.selectors import _decode_token as decode_cursor  # noqa: F401 (used by forms)
from trainhub.jobs.selectors import _encode_token as encode_cursor

JOB_PAGE_SIZE = 50
LOG_TAIL_LINES = 500


def projects_with_permission(*, user: AbstractBaseUser, permission: str) -> list[Project]:
    """The user's projects in which their role grants ``permission``, by project id."""
    return [m.project for m in memberships_for_user(user=user) if role_grants(m.role, permission)]


def jobs_page(*, projects: list[Project], state: str = "", cursor: tuple[dt.datetime, int] | None = None,
              size: int = JOB_PAGE_SIZE) -> tuple[list[CustomJob], str]:
    """Jobs of ``projects``, newest first, keyset-paginated on (create_time, id) like selectors.jobs_list.

    Returns the page and the cursor of the next page ("" on the last page).
    """
    jobs = CustomJob.objects.filter(project__in=projects).select_related("project")
    if state:
        jobs = jobs.filter(state=state)
    if cursor:
        created, pk = cursor
        jobs = jobs.filter(Q(create_time__lt=created) | Q(create_time=created, pk__lt=pk))
    page = list(jobs.order_by("-create_time", "-id")[: size + 1])
    next_cursor = encode_cursor(page[size - 1]) if len(page) > size else ""
    return page[:size], next_cursor


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


def node_pools_with_nodes() -> list[NodePool]:
    """Every node pool with its usage counts, its nodes, and on each node ``active_replicas``
    (at most one: the replica occupying it, with its job and project)."""
    occupying = Replica.objects.filter(active=True).select_related("job__project")
    nodes = Node.objects.order_by("name").prefetch_related(
        Prefetch("replicas", queryset=occupying, to_attr="active_replicas"))
    return list(node_pools_with_usage().prefetch_related(Prefetch("nodes", queryset=nodes)))


def api_token_for_user(*, user: AbstractBaseUser) -> ApiToken | None:
    return ApiToken.objects.filter(user=user).first()
