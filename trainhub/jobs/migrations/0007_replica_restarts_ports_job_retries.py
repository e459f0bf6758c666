"""Vertex retries and per-job ports: a job's retry count, a replica's restart number (a restart is a
new row, so it joins the replica's identity) and its rendezvous ports."""

from django.db import migrations, models

# As 0003_job_list_indexes: SQLite adds a NOT NULL column by rebuilding the table, which drops
# this index (created by raw SQL, unknown to the migration state); PostgreSQL keeps it.
NAME_PREFIX_INDEX_SQLITE = "CREATE INDEX IF NOT EXISTS job_name_prefix ON jobs_customjob (display_name COLLATE NOCASE)"


def restore_name_prefix_index(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(NAME_PREFIX_INDEX_SQLITE)


class Migration(migrations.Migration):

    dependencies = [
        ('inventory', '0003_agent_identity'),
        ('jobs', '0006_job_indexes_written_per_submission'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='replica',
            options={'ordering': ['pool_index', 'replica_index', 'restart']},
        ),
        migrations.RemoveConstraint(
            model_name='replica',
            name='replica_identity',
        ),
        migrations.AddField(
            model_name='customjob',
            name='retry_count',
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.RunPython(restore_name_prefix_index, migrations.RunPython.noop),
        migrations.AddField(
            model_name='replica',
            name='cluster_port',
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='replica',
            name='master_port',
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='replica',
            name='restart',
            field=models.PositiveSmallIntegerField(default=0),
        ),
        migrations.AddConstraint(
            model_name='replica',
            constraint=models.UniqueConstraint(fields=('job', 'pool_index', 'replica_index', 'attempt', 'restart'), name='replica_identity'),
        ),
    ]
