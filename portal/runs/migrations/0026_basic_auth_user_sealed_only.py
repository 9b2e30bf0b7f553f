"""A run's stored config named its Basic-auth user in clear (``config.auth.user``) beside the sealed
credentials that hold it too (``config.secrets``): the clear copy goes (portal/runs/configs.py)."""

from django.db import migrations


def drop_clear_user(apps, schema_editor):
    Run = apps.get_model("runs", "Run")
    named = Run.objects.filter(config__auth__has_key="user").only("pk", "config")
    for run in named.iterator(chunk_size=500):
        config = dict(run.config)
        config["auth"] = {key: value for key, value in config["auth"].items() if key != "user"}
        Run.objects.filter(pk=run.pk).update(config=config)


class Migration(migrations.Migration):
    dependencies = [("runs", "0025_unwindowed_requests")]

    operations = [migrations.RunPython(drop_clear_user, migrations.RunPython.noop)]
