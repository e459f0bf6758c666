"""Slurm migrations that change existing rows."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.slurm.conftest import make_job, start_job
from trainhub.slurm.models import JobNode, NodePhase, StepNode
from trainhub.slurm.services.steps import step_create
from trainhub.slurm.steps import StepRequest

pytestmark = pytest.mark.django_db(transaction=True)


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.migrate(targets or executor.loader.graph.leaf_nodes())


def test_steps_made_before_steps_held_cpus_hold_every_cpu_of_the_job_on_their_nodes(cluster, now):
    job = make_job(cluster, num_nodes=2, num_tasks=4, now=now)
    start_job(job, ["a4-0", "a4-1"], now=now)
    JobNode.objects.filter(job=job).update(phase=NodePhase.RUNNING)
    step_create(job=job, run_index=0, argv=["x"], environment={}, request=StepRequest(), label=False, now=now)
    try:
        migrate([("slurm", "0011_node_features_job_constraint")])
        migrate([("slurm", "0012_step_resources")])
    finally:
        migrate(None)
    assert list(StepNode.objects.order_by("node_index").values_list("cpus", flat=True)) == [2, 2]


def test_associations_made_before_decay_usage_start_from_their_raw_usage(cluster, now):
    from trainhub.slurm.models import Association

    Association.objects.filter(cluster=cluster, user="root").update(raw_usage=1234.5)
    try:
        migrate([("slurm", "0020_job_max_nodes")])
        migrate([("slurm", "0021_association_decay_usage")])
    finally:
        migrate(None)
    assert Association.objects.get(cluster=cluster, user="root").decay_usage == 1234.5


def test_jobs_made_before_jobs_kept_their_submitters_ids_take_them(cluster, cast, now):
    """A job of a user with an identity takes it; one without, the default; one whose submitter is
    gone keeps the project's replica uid and name it showed before."""
    from django.conf import settings

    from trainhub.iam.services import posix_identity_set
    from trainhub.slurm.models import SlurmJob

    posix_identity_set(user=cast["uma"], uid=1001)
    jobs = [make_job(cluster, user="uma", submitted_by=cast["uma"], now=now),
            make_job(cluster, user="vic", submitted_by=cast["vic"], now=now),
            make_job(cluster, user="gone", submitted_by=None, now=now)]
    try:
        migrate([("slurm", "0021_association_decay_usage")])
        migrate([("slurm", "0022_job_posix_identity")])
    finally:
        migrate(None)
    vic = settings.TRAINHUB_USER_UID_BASE + cast["vic"].pk
    project = settings.TRAINHUB_REPLICA_UID_BASE + cluster.project_id
    assert [SlurmJob.objects.values_list("uid", "gid", "group_name").get(pk=job.pk) for job in jobs] == [
        (1001, 1001, "uma"), (vic, vic, "vic"), (project, project, "alpha")]


def test_jobs_made_before_fifo_priorities_were_counted_keep_the_value_their_id_gave(cluster, now):
    """priority/basic gave TOP_PRIORITY less the job id; the cluster has given one a job id so far."""
    from trainhub.slurm.models import SlurmCluster, SlurmJob

    job = make_job(cluster, now=now)
    try:
        migrate([("slurm", "0036_job_gpus_per_node_option")])
        migrate([("slurm", "0037_fifo_priorities")])
    finally:
        migrate(None)
    assert SlurmJob.objects.get(pk=job.pk).fifo_priority == 0xFFFF0000 - job.job_id
    assert SlurmCluster.objects.get(pk=cluster.pk).fifo_priorities == job.job_id


def test_jobs_made_before_tasks_given_was_kept_count_their_tasks_given_where_n_set_their_nodes(cluster, now):
    """-n without -N (nodes_from_tasks) gave the tasks; for the others the submission is not kept."""
    from trainhub.slurm.models import SlurmJob

    jobs = [make_job(cluster, nodes_from_tasks=True, num_tasks=3, now=now), make_job(cluster, num_nodes=2, now=now)]
    try:
        migrate([("slurm", "0040_job_min_nodes")])
        migrate([("slurm", "0041_job_tasks_given")])
    finally:
        migrate(None)
    assert [SlurmJob.objects.get(pk=job.pk).tasks_given for job in jobs] == [True, False]


def test_jobs_made_before_tasks_given_was_kept_count_their_tasks_given_where_their_options_show_it(cluster, now):
    """--ntasks-per-node is kept (ntasks_per_node), and a node range's tasks_from_nodes is off only where -n or
    --ntasks-per-node gave its tasks: both gave tasks as -n alone did (NumTasks 4 for ``-N 2 --ntasks-per-node=2``
    cancelled while held, not N/A); a plain -N 2 and a range without them did not."""
    from trainhub.slurm.models import SlurmJob

    jobs = [make_job(cluster, num_nodes=2, num_tasks=4, ntasks_per_node=2, now=now),
            make_job(cluster, num_nodes=3, num_tasks=3, min_nodes=1, max_nodes=4, now=now),
            make_job(cluster, num_nodes=2, now=now),
            make_job(cluster, num_nodes=4, num_tasks=1, min_nodes=1, max_nodes=4, tasks_from_nodes=True, now=now)]
    try:
        migrate([("slurm", "0040_job_min_nodes")])
        migrate(None)
    finally:
        migrate(None)
    assert [SlurmJob.objects.get(pk=job.pk).tasks_given for job in jobs] == [True, True, False, False]
