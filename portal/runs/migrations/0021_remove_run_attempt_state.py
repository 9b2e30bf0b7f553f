"""The run's execution state now lives in RunAttempt rows (0019 copied it there): its columns go."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0020_runattempt"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="run", name="run_running_heartbeat_idx"),
        migrations.RemoveField(model_name="run", name="attempt"),
        migrations.RemoveField(model_name="run", name="attempts"),
        migrations.RemoveField(model_name="run", name="current_arm"),
        migrations.RemoveField(model_name="run", name="deadline"),
        migrations.RemoveField(model_name="run", name="generator_host"),
        migrations.RemoveField(model_name="run", name="handback"),
        migrations.RemoveField(model_name="run", name="heartbeat"),
        migrations.RemoveField(model_name="run", name="requeued"),
        migrations.RemoveField(model_name="run", name="worker"),
        migrations.AlterField(
            model_name="runattempt",
            name="run",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="attempts", to="runs.run"
            ),
        ),
    ]
