"""The cost ledger (finished jobs' GPU-seconds per project and strategy, so the Quotas page's
cost does not read every job ever run), filled from the jobs already finished; and an index of
the active replicas."""

from collections import defaultdict

import django.db.models.deletion
from django.db import migrations, models


def accelerator_of(metric: str, gpu_names: dict[str, str]) -> str | None:
    # As trainhub.scheduling.quota.metric_accelerator at the time of this migration.
    gpu = metric.removeprefix("custom_model_training_").removeprefix("preemptible_").removeprefix("nvidia_")
    return next((accel for accel, name in gpu_names.items() if name == gpu.removesuffix("_gpus")), None)


def fill_ledgers(apps, schema_editor):
    from trainhub.catalog.machines import QUOTA_GPU_NAME

    CustomJob = apps.get_model("jobs", "CustomJob")
    CostLedger = apps.get_model("jobs", "CostLedger")
    jobs: dict[tuple[int, str], int] = defaultdict(int)
    seconds: dict[tuple[int, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    finished = CustomJob.objects.filter(end_time__isnull=False, start_time__isnull=False).values_list(
        "project_id", "strategy", "quota_demand", "start_time", "end_time")
    for project_id, strategy, demand, started, ended in finished.iterator(chunk_size=5000):
        key = (project_id, strategy)
        jobs[key] += 1
        for metric, gpus in (demand or {}).items():
            if (accelerator := accelerator_of(metric, QUOTA_GPU_NAME)) is not None:
                seconds[key][accelerator] += gpus * (ended - started).total_seconds()
    CostLedger.objects.bulk_create(CostLedger(project_id=project_id, strategy=strategy, jobs=count,
                                              gpu_seconds=dict(seconds[(project_id, strategy)]))
                                   for (project_id, strategy), count in jobs.items())


class Migration(migrations.Migration):

    dependencies = [
        ('iam', '0001_initial'),
        ('inventory', '0002_node_dedicated_to'),
        ('jobs', '0003_job_list_indexes'),
    ]

    operations = [
        migrations.CreateModel(
            name='CostLedger',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('strategy', models.CharField(max_length=24)),
                ('jobs', models.PositiveIntegerField(default=0)),
                ('gpu_seconds', models.JSONField(default=dict)),
            ],
        ),
        migrations.AddIndex(
            model_name='replica',
            index=models.Index(condition=models.Q(('active', True)), fields=['job'], name='replica_active_job'),
        ),
        migrations.AddField(
            model_name='costledger',
            name='project',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='cost_ledger', to='iam.project'),
        ),
        migrations.AddConstraint(
            model_name='costledger',
            constraint=models.UniqueConstraint(fields=('project', 'strategy'), name='one_ledger_per_strategy'),
        ),
        migrations.RunPython(fill_ledgers, migrations.RunPython.noop),
    ]
