# The Scenario model moved here from portal/targets (issue 23): state only. Its table stays
# targets_scenario (Meta.db_table), no row is copied; the foreign keys of runs and hooks follow in
# their own state-only migrations, then targets forgets the model (targets 0009).

import uuid

import django.db.models.deletion
from django.db import migrations, models


def move_content_type(apps, schema_editor):
    """The admin's log and permissions name the model by its content type: rename it in place."""
    content_types = apps.get_model("contenttypes", "ContentType")
    if not content_types.objects.filter(app_label="scenarios", model="scenario").exists():
        content_types.objects.filter(app_label="targets", model="scenario").update(app_label="scenarios")


def back(apps, schema_editor):
    content_types = apps.get_model("contenttypes", "ContentType")
    if not content_types.objects.filter(app_label="targets", model="scenario").exists():
        content_types.objects.filter(app_label="scenarios", model="scenario").update(app_label="targets")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("projects", "0004_invitations"),
        ("targets", "0008_scenario_budgets_scenario_callback_url_and_more"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Scenario",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("code", models.UUIDField(default=uuid.uuid4, editable=False, unique=True)),
                        ("name", models.CharField(max_length=200)),
                        ("config", models.JSONField(default=dict)),
                        ("version", models.PositiveIntegerField(default=1)),
                        ("budgets", models.JSONField(blank=True, default=dict)),
                        ("callback_url", models.URLField(blank=True, max_length=500)),
                        ("created", models.DateTimeField(auto_now_add=True)),
                        ("updated", models.DateTimeField(auto_now=True)),
                        ("project", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="scenarios", to="projects.project")),
                        ("target", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="scenarios", to="targets.target")),
                    ],
                    options={
                        "db_table": "targets_scenario",
                        "ordering": ["name"],
                        "constraints": [
                            models.UniqueConstraint(fields=("project", "name"), name="scenario_project_name_uniq")
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(move_content_type, back),
    ]
