from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('slurm', '0037_fifo_priorities'),
    ]

    operations = [
        migrations.AddField(
            model_name='slurmjob',
            name='cpus_per_gpu',
            field=models.PositiveIntegerField(default=0),
        ),
    ]
