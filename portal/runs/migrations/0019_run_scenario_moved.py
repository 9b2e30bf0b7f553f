# Run.scenario follows the Scenario model to portal/scenarios: state only (same table, same column).

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0018_run_preflight_failed"),
        ("scenarios", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="run",
                    name="scenario",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="runs",
                        to="scenarios.scenario",
                    ),
                ),
            ],
            database_operations=[],
        ),
    ]
