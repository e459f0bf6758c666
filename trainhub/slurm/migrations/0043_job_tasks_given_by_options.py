from django.db import migrations
from django.db.models import Q


def given_by_options(apps, schema_editor):
    """0041 counted only -n without -N; a job kept two more signs that its tasks were given: --ntasks-per-node
    (ntasks_per_node, which sbatch makes -N x it) and a node range whose tasks do not come from its nodes
    (tasks_from_nodes is off only where -n or --ntasks-per-node was given). One UPDATE, as 0041's."""
    apps.get_model("slurm", "SlurmJob").objects.filter(
        Q(ntasks_per_node__gt=0) | Q(min_nodes__gt=0, tasks_from_nodes=False), tasks_given=False,
    ).update(tasks_given=True)


class Migration(migrations.Migration):

    dependencies = [
        ('slurm', '0042_job_reason_prev_db'),
    ]

    operations = [
        migrations.RunPython(given_by_options, migrations.RunPython.noop),
    ]
