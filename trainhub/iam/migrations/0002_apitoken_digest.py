"""API tokens are stored as their SHA-256 digest (trainhub.iam.tokens): the column ``key`` becomes
``digest`` and every stored token is replaced by its digest, so existing tokens keep working.
Not reversible: a digest cannot be turned back into its token."""

import hashlib

from django.db import migrations, models


def hash_tokens(apps, schema_editor):
    ApiToken = apps.get_model("iam", "ApiToken")
    for token in ApiToken.objects.all().only("pk", "digest"):
        # The same digest as trainhub.iam.tokens.token_digest (a migration keeps its own copy).
        token.digest = hashlib.sha256(token.digest.encode("utf-8")).hexdigest()
        token.save(update_fields=["digest"])


class Migration(migrations.Migration):
    dependencies = [("iam", "0001_initial")]

    operations = [
        migrations.RenameField(model_name="apitoken", old_name="key", new_name="digest"),
        migrations.AlterField(model_name="apitoken", name="digest",
                              field=models.CharField(max_length=64, unique=True)),
        migrations.RunPython(hash_tokens, migrations.RunPython.noop),
    ]
