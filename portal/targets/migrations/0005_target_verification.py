"""Ownership verification fields; every existing target gets its own token (a callable default on
AddField would give them all the same one)."""

from django.db import migrations, models

import portal.lib.security.verification


def fill_tokens(apps, schema_editor):
    Target = apps.get_model("targets", "Target")
    for target in Target.objects.filter(verification_token="").only("pk"):
        Target.objects.filter(pk=target.pk).update(verification_token=portal.lib.security.verification.new_token())


class Migration(migrations.Migration):
    dependencies = [
        ("targets", "0004_server_process_name"),
    ]

    operations = [
        migrations.AddField(
            model_name="target",
            name="verification_token",
            field=models.CharField(default="", editable=False, max_length=64),
            preserve_default=False,
        ),
        migrations.RunPython(fill_tokens, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="target",
            name="verification_token",
            field=models.CharField(default=portal.lib.security.verification.new_token, editable=False, max_length=64),
        ),
        migrations.AddField(
            model_name="target",
            name="verified_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="target",
            name="verified_by_method",
            field=models.CharField(blank=True, max_length=16),
        ),
        migrations.AddField(
            model_name="target",
            name="verification_error",
            field=models.TextField(blank=True),
        ),
    ]
