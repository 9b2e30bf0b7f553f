"""Frozen reports that name a Basic-auth user are signed again without it (docs/auditors.md)."""

from django.db import migrations


def redact(apps, schema_editor):
    from portal.signing.services import redact_credential_names

    redact_credential_names(apps.get_model("signing", "FrozenReport"), apps.get_model("signing", "SigningKey"))


class Migration(migrations.Migration):
    dependencies = [("signing", "0001_initial")]

    operations = [migrations.RunPython(redact, migrations.RunPython.noop)]
