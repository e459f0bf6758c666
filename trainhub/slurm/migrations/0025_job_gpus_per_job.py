from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('slurm', '0024_job_started_by_backfill'),
    ]

    operations = [
        migrations.AddField(
            model_name='slurmjob',
            name='gpus_per_job',
            field=models.PositiveIntegerField(default=0),
        ),
    ]
