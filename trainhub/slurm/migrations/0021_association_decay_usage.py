from django.db import migrations, models
from django.db.models import F


def copy_raw_usage(apps, schema_editor):
    apps.get_model("slurm", "Association").objects.update(decay_usage=F("raw_usage"))


class Migration(migrations.Migration):

    dependencies = [
        ('slurm', '0020_job_max_nodes'),
    ]

    operations = [
        migrations.AddField(
            model_name='association',
            name='decay_usage',
            field=models.FloatField(default=0.0),
        ),
        migrations.RunPython(copy_raw_usage, migrations.RunPython.noop),
    ]
