from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('slurm', '0023_job_script_path'),
    ]

    operations = [
        migrations.AddField(
            model_name='slurmjob',
            name='started_by_backfill',
            field=models.BooleanField(default=False),
        ),
    ]
