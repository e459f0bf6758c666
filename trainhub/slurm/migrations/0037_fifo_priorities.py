from django.db import migrations, models
from django.db.models import F

#: snapshot.BASIC_TOP_PRIORITY (slurmctld's TOP_PRIORITY), as of this migration.
TOP_PRIORITY = 0xFFFF0000


def number_existing(apps, schema_editor):
    """The FIFO values priority/basic gave before they were counted: TOP_PRIORITY less the job id,
    and one a job id so far for each cluster."""
    apps.get_model("slurm", "SlurmJob").objects.update(fifo_priority=TOP_PRIORITY - F("job_id"))
    apps.get_model("slurm", "SlurmCluster").objects.update(fifo_priorities=F("next_job_id") - 1)


class Migration(migrations.Migration):

    dependencies = [
        ('slurm', '0036_job_gpus_per_node_option'),
    ]

    operations = [
        migrations.AddField(
            model_name='slurmcluster',
            name='fifo_priorities',
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='slurmjob',
            name='fifo_priority',
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.RunPython(number_existing, migrations.RunPython.noop),
    ]
