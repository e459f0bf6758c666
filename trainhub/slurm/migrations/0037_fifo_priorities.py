from django.db import migrations, models
from django.db.models import F, Value
from django.db.models.functions import Greatest, Least

#: snapshot.BASIC_TOP_PRIORITY (slurmctld's TOP_PRIORITY), as of this migration.
TOP_PRIORITY = 0xFFFF0000


def number_existing(apps, schema_editor):
    """The FIFO values priority/basic gave before they were counted: TOP_PRIORITY less the job id
    (at least 1, slurmctld's lowest), and one a job id so far for each cluster (at most TOP_PRIORITY
    less 1: job ids can run past it)."""
    apps.get_model("slurm", "SlurmJob").objects.update(
        fifo_priority=Greatest(Value(TOP_PRIORITY, output_field=models.BigIntegerField()) - F("job_id"), Value(1)))
    apps.get_model("slurm", "SlurmCluster").objects.update(
        fifo_priorities=Least(F("next_job_id") - 1, Value(TOP_PRIORITY - 1, output_field=models.BigIntegerField())))


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
