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
