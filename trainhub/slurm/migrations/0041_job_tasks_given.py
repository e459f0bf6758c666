from django.db import migrations, models


def given_by_tasks(apps, schema_editor):
    """A job whose node count came from -n (nodes_from_tasks) was given its tasks; for the others the
    submission is not kept, so they stay without (NumTasks=N/A only where they never had a node test)."""
    apps.get_model("slurm", "SlurmJob").objects.filter(nodes_from_tasks=True).update(tasks_given=True)


class Migration(migrations.Migration):

    dependencies = [
        ('slurm', '0040_job_min_nodes'),
    ]

    operations = [
        migrations.AddField(
            model_name='slurmjob',
            name='tasks_given',
            field=models.BooleanField(default=False),
        ),
        migrations.RunPython(given_by_tasks, migrations.RunPython.noop),
    ]
