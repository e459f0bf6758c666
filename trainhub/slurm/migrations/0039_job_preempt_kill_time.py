from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('slurm', '0038_job_cpus_per_gpu'),
    ]

    operations = [
        migrations.AddField(
            model_name='slurmjob',
            name='preempt_kill_time',
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
