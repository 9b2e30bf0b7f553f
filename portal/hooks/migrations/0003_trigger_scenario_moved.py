# WebhookTrigger.scenario follows the Scenario model to portal/scenarios: state only.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("hooks", "0002_webhookdelivery_signature_idx"),
        ("scenarios", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="webhooktrigger",
                    name="scenario",
                    field=models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE, related_name="webhook", to="scenarios.scenario"
                    ),
                ),
            ],
            database_operations=[],
        ),
    ]
