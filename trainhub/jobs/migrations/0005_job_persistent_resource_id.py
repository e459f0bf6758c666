"""CustomJob.persistent_resource_id: jobSpec.persistentResourceId in an indexed column, filled from
the documents of the jobs already stored, so a persistent resource's page finds its jobs through an
index instead of reading every job's document."""

from django.db import migrations, models


def fill_resource_ids(apps, schema_editor):
    CustomJob = apps.get_model("jobs", "CustomJob")
    on_resources = CustomJob.objects.filter(spec__jobSpec__has_key="persistentResourceId").values_list("pk", "spec")
    for pk, spec in on_resources.iterator(chunk_size=2000):
        CustomJob.objects.filter(pk=pk).update(persistent_resource_id=spec["jobSpec"]["persistentResourceId"])


class Migration(migrations.Migration):

    dependencies = [
        ("jobs", "0004_cost_ledger_active_replicas"),
    ]

    operations = [
        migrations.AddField(
            model_name="customjob",
            name="persistent_resource_id",
            field=models.CharField(blank=True, max_length=63, null=True),
        ),
        migrations.RunPython(fill_resource_ids, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name="customjob",
            index=models.Index(condition=models.Q(("persistent_resource_id__isnull", False)),
                               fields=["persistent_resource_id", "state", "create_time"], name="job_resource_state"),
        ),
    ]
