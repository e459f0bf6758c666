from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('slurm', '0039_job_preempt_kill_time'),
    ]

    operations = [
        migrations.AddField(
            model_name='slurmjob',
            name='min_nodes',
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='slurmjob',
            name='tasks_from_nodes',
            field=models.BooleanField(default=False),
        ),
    ]
