from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('slurm', '0017_step_pty'),
    ]

    operations = [
        migrations.AddField(
            model_name='stepnode',
            name='stop_signal',
            field=models.PositiveSmallIntegerField(default=15),
        ),
    ]
