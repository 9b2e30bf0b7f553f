"""A saved scenario's Basic user name is half a credential: it stays sealed in ``config["secrets"]``
(with the password, where every scenario saved with Basic credentials already holds it) and leaves
the clear form values. A scenario whose sealed secrets lack it (none known) keeps its clear value."""

from django.db import migrations

from portal import vault


def seal_basic_users(apps, schema_editor):
    Scenario = apps.get_model("scenarios", "Scenario")
    for scenario in Scenario.objects.filter(config__has_key="auth_user").iterator():
        config = scenario.config
        user = config.get("auth_user") or ""
        sealed = vault.unseal(config["secrets"]) if config.get("secrets") else {}
        if user and (sealed.get("auth") or {}).get("user") != user:
            continue  # not sealed anywhere: dropping it would lose it
        del config["auth_user"]
        scenario.save(update_fields=["config"])


class Migration(migrations.Migration):
    dependencies = [("scenarios", "0002_tolerance")]
    operations = [migrations.RunPython(seal_basic_users, migrations.RunPython.noop)]
