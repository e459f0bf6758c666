"""Log volume benchmark: does a job that writes 200,000 log lines change the job list's p95?

The dataset: ``page_active_jobs`` active and ``page_finished_jobs`` finished jobs (the rows of
bench/pages.py), one of them running on a node. The job list (Active and Finished tabs) is timed,
then the running replica sends 200,000 lines through ``replica_logs_append`` in the agent's
1,000-line chunks (the replica log cap, TRAINHUB_REPLICA_LOG_MAX_LINES, stores the first ones and
one marker), then the job list is timed again. Figures, not assertions: compare the two rows.
"""

from __future__ import annotations

import datetime as dt
import random
import time
from typing import TYPE_CHECKING

from bench.environment import collect_statistics
from bench.report import Column, Section

if TYPE_CHECKING:
    from bench.scheduler_pass import Sizes

LOG_LINES = 200_000
CHUNK = 1_000  # trainhub.agent.node.LOG_CHUNK_LINES
PAGES = (("jobs: active", ""), ("jobs: finished", "tab=finished"))


def _build(sizes: Sizes):
    from django.db import transaction
    from django.utils import timezone

    from bench.pages import _job_row
    from bench.scheduler_pass import bench_nodes, bench_project, clear_jobs
    from trainhub.jobs import states
    from trainhub.jobs.models import CustomJob, Replica

    now = timezone.now()
    rng = random.Random(7)
    project, user = bench_project()
    node_id = bench_nodes(8)[0]
    clear_jobs()
    rows = []
    for index in range(sizes.page_finished_jobs):
        ended = now - dt.timedelta(seconds=rng.uniform(60, 30 * 86400))
        started = ended - dt.timedelta(seconds=rng.uniform(60, 8 * 3600))
        rows.append(_job_row(index, project=project, user=user, rng=rng, state=states.SUCCEEDED,
                             created=started - dt.timedelta(seconds=60), started=started, ended=ended))
    for index in range(sizes.page_finished_jobs, sizes.page_finished_jobs + sizes.page_active_jobs):
        rows.append(_job_row(index, project=project, user=user, rng=rng, state=states.QUEUED,
                             created=now - dt.timedelta(seconds=rng.uniform(5, 6 * 3600)), started=None,
                             ended=None, replicas=1))
    running = rows[-1]
    running.state, running.start_time = states.RUNNING, running.create_time
    with transaction.atomic():
        CustomJob.objects.bulk_create(rows, batch_size=2000)
        replica = Replica.objects.create(job=running, pool_index=0, replica_index=0, node_id=node_id,
                                         gpu_indices=list(range(8)), state=states.REPLICA_RUNNING,
                                         assigned_at=now, started_at=now)
    collect_statistics()
    return user, replica


def _measure(client, label: str, query: str, repeat: int, when: str) -> dict:
    """bench/pages.py's measure of one page (one warm-up, ``repeat`` timed requests, SQL counted)."""
    from django.urls import reverse

    from bench.pages import Sample
    from bench.pages import _measure as measure_page

    url = reverse("jobs:list") + (f"?{query}" if query else "")
    return {**measure_page(client, Sample("jobs:list", label, query=query), url, repeat), "when": when}


def bench_log_volume(sizes: Sizes) -> Section:
    from django.conf import settings
    from django.test import Client
    from django.utils import timezone

    from trainhub.jobs.models import LogLine, Replica
    from trainhub.jobs.services import replica_logs_append

    user, replica = _build(sizes)
    client = Client()
    client.force_login(user)
    repeat = max(50, sizes.page_repeat)
    section = Section(
        name="log_volume", key=("page", "when"),
        title=(f"Job list with {sizes.page_active_jobs:,} active and {sizes.page_finished_jobs:,} finished jobs, "
               f"before and after one replica sends {LOG_LINES:,} log lines"),
        columns=[Column("page", "page"), Column("when", "when"), Column("p50_ms", "p50 ms"),
                 Column("p95_ms", "p95 ms"), Column("cpu_p50_ms", "CPU p50 ms"), Column("queries", "SQL")],
    )
    section.rows += [_measure(client, label, query, repeat, "before") for label, query in PAGES]
    now = timezone.now()
    began = time.perf_counter()
    for first in range(0, LOG_LINES, CHUNK):
        replica_logs_append(replica=replica, lines=[("stdout", now, f"step {n} loss {1 / (n + 1):.6f}")
                                                    for n in range(first, first + CHUNK)])
    append_seconds = time.perf_counter() - began
    section.rows += [_measure(client, label, query, repeat, "after") for label, query in PAGES]
    stored = LogLine.objects.filter(replica=replica).count()
    counted = Replica.objects.get(pk=replica.pk).log_lines
    section.notes += [
        (f"{LOG_LINES:,} lines sent in {LOG_LINES // CHUNK} chunks in {append_seconds:.1f} s "
         f"({LOG_LINES / append_seconds:,.0f} lines/s); {stored:,} rows stored "
         f"(TRAINHUB_REPLICA_LOG_MAX_LINES={settings.TRAINHUB_REPLICA_LOG_MAX_LINES:,} and the marker), "
         f"{counted:,} counted."),
        (f"{repeat} timed requests per row after one warm-up; SQL counted on one more. CPU p50 = this process's "
         "CPU time per request: unlike wall time, it does not grow when other work shares the machine."),
    ]
    return section
