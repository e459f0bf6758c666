"""Thin Celery wrappers: one scheduler pass per cluster. Beat passes every cluster every
TRAINHUB_SLURM_PASS_INTERVAL_SECONDS; submissions, job ends and admin edits request one more, and the
requests made before it starts share it (services.clusters.request_pass).
Job mail: each mail is sent after its transition commits; beat flushes what was missed every minute.
Job records: beat sends pending jobs' first records every 5 seconds, as slurmctld's db_inx thread
(services.accounting.job_records_sent)."""

import logging

from celery import shared_task
from django.utils import timezone

from trainhub.common.enqueue import enqueue_in
from trainhub.common.redis import get_redis
from trainhub.scheduling import pass_requests
from trainhub.scheduling.leader import leader_lock
from trainhub.slurm.models import SlurmCluster
from trainhub.slurm.services import accounting, mail, passes
from trainhub.slurm.services.clusters import pass_requested_flag

logger = logging.getLogger(__name__)


def leader_key(cluster_pk: int) -> str:
    return f"trainhub:slurm:{cluster_pk}:leader"


@shared_task(autoretry_for=(ConnectionError,), retry_backoff=True, max_retries=5, ignore_result=True)
def cluster_pass(cluster_pk: int) -> None:
    client = get_redis()
    with leader_lock(client, key=leader_key(cluster_pk)) as leading:
        if not leading:
            logger.debug("another worker runs the pass of Slurm cluster %s", cluster_pk)
            return
        pass_requests.claim(client, pass_requested_flag(cluster_pk))
        summary = passes.cluster_pass_recorded(cluster_pk=cluster_pk, now=timezone.now())
    if pass_requests.requested_meanwhile(client, pass_requested_flag(cluster_pk)):
        cluster_pass.delay(cluster_pk)
    elif summary is not None and summary.main_due_in > 0:
        # jobs wait for the main scheduler (batch_sched_delay): a pass when it is due, not beat's next
        enqueue_in(summary.main_due_in, "trainhub.slurm.tasks.cluster_pass", cluster_pk)


@shared_task(ignore_result=True)
def all_clusters_pass() -> None:
    for pk in SlurmCluster.objects.values_list("pk", flat=True):
        cluster_pass.delay(pk)


@shared_task(ignore_result=True)
def job_mail_send(mail_pk: int) -> None:
    mail.job_mail_send(mail_pk=mail_pk, now=timezone.now())


@shared_task(ignore_result=True)
def job_mail_flush() -> None:
    mail.job_mail_flush(now=timezone.now())


@shared_task(ignore_result=True)
def job_records_send() -> None:
    accounting.job_records_sent(now=timezone.now())
