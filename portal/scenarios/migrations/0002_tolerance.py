from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("scenarios", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="scenario",
            name="tolerance_pct",
            field=models.FloatField(db_default=10.0, default=10.0),
        ),
    ]
