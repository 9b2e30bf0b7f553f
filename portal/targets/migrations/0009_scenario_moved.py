# The Scenario model now lives in portal/scenarios (scenarios 0001): forget it here, state only; its
# table, targets_scenario, is the moved model's.

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("targets", "0008_scenario_budgets_scenario_callback_url_and_more"),
        ("runs", "0019_run_scenario_moved"),
        ("hooks", "0003_trigger_scenario_moved"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="Scenario")],
            database_operations=[],
        ),
    ]
