"""The job list's indexes (Active and Finished tabs, name search), the GPU type column its
filters and the dashboards use, and the invariant the tabs rest on: finished <=> end_time set."""

from django.conf import settings
from django.db import migrations, models

NO_ACCELERATOR = "ACCELERATOR_TYPE_UNSPECIFIED"


def main_accelerator_type(spec: dict) -> str:
    # As jobs.spec.main_accelerator_type at the time of this migration, over the canonical document.
    gpus: dict[str, int] = {}
    for pool in spec["jobSpec"]["workerPoolSpecs"]:
        machine = pool.get("machineSpec", {}) if pool else {}
        if machine.get("acceleratorCount"):
            kind = machine["acceleratorType"]
            gpus[kind] = gpus.get(kind, 0) + pool["replicaCount"] * machine["acceleratorCount"]
    return max(gpus, key=gpus.__getitem__) if gpus else NO_ACCELERATOR


def fill_accelerator_type(apps, schema_editor):
    CustomJob = apps.get_model("jobs", "CustomJob")
    by_kind: dict[str, list[int]] = {}
    for pk, spec in CustomJob.objects.values_list("pk", "spec").iterator(chunk_size=2000):
        by_kind.setdefault(main_accelerator_type(spec), []).append(pk)
    by_kind.pop(NO_ACCELERATOR, None)
    for kind, pks in by_kind.items():
        for start in range(0, len(pks), 5000):  # SQLite caps the parameters of one statement
            CustomJob.objects.filter(pk__in=pks[start:start + 5000]).update(accelerator_type=kind)


# Search is "name starts with" (case-insensitive). Django writes it as UPPER(name::text) LIKE
# UPPER(%s) on PostgreSQL, which only a text_pattern_ops expression index serves, and as LIKE on
# SQLite, which only a NOCASE index serves: neither can be declared portably in Meta.indexes.
NAME_PREFIX_INDEX = {
    "postgresql": "CREATE INDEX IF NOT EXISTS job_name_prefix ON jobs_customjob (UPPER(display_name::text) text_pattern_ops)",
    "sqlite": "CREATE INDEX IF NOT EXISTS job_name_prefix ON jobs_customjob (display_name COLLATE NOCASE)",
}


def create_name_prefix_index(apps, schema_editor):
    sql = NAME_PREFIX_INDEX.get(schema_editor.connection.vendor)
    if sql:
        schema_editor.execute(sql)


def drop_name_prefix_index(apps, schema_editor):
    if schema_editor.connection.vendor in NAME_PREFIX_INDEX:
        schema_editor.execute("DROP INDEX IF EXISTS job_name_prefix")


class Migration(migrations.Migration):

    dependencies = [
        ('iam', '0001_initial'),
        ('jobs', '0002_job_owner_trial_outputs'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='customjob',
            name='accelerator_type',
            field=models.CharField(default='ACCELERATOR_TYPE_UNSPECIFIED', max_length=32),
        ),
        migrations.RunPython(fill_accelerator_type, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name='customjob',
            index=models.Index(condition=models.Q(('end_time__isnull', True)), fields=['project', '-create_time', '-id'], name='job_active_created'),
        ),
        migrations.AddIndex(
            model_name='customjob',
            index=models.Index(condition=models.Q(('end_time__isnull', True)), fields=['project', '-gpu_count', '-id'], name='job_active_gpus'),
        ),
        migrations.AddIndex(
            model_name='customjob',
            index=models.Index(condition=models.Q(('end_time__isnull', False)), fields=['-end_time', '-id'], name='job_finished_ended'),
        ),
        migrations.AddIndex(
            model_name='customjob',
            index=models.Index(condition=models.Q(('end_time__isnull', False)), fields=['project', '-end_time', '-id'], name='job_finished_project'),
        ),
        migrations.AddIndex(
            model_name='customjob',
            index=models.Index(condition=models.Q(('end_time__isnull', False)), fields=['created_by', '-end_time', '-id'], name='job_finished_user'),
        ),
        migrations.AddIndex(
            model_name='customjob',
            index=models.Index(condition=models.Q(('end_time__isnull', False)), fields=['state', '-end_time', '-id'], name='job_finished_state'),
        ),
        migrations.AddIndex(
            model_name='customjob',
            index=models.Index(condition=models.Q(('start_time__isnull', False)), fields=['start_time'], name='job_started'),
        ),
        migrations.AddConstraint(
            model_name='customjob',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('end_time__isnull', False), ('state__in', ['JOB_STATE_CANCELLED', 'JOB_STATE_FAILED', 'JOB_STATE_SUCCEEDED'])), models.Q(('end_time__isnull', True), models.Q(('state__in', ['JOB_STATE_CANCELLED', 'JOB_STATE_FAILED', 'JOB_STATE_SUCCEEDED']), _negated=True)), _connector='OR'), name='job_end_time_iff_finished'),
        ),
        migrations.RunPython(create_name_prefix_index, drop_name_prefix_index),
    ]
