# The metric roll-ups' model now belongs to the ops app (ops/migrations/0001 takes over
# its state); the table and its rows stay where they are.

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("retrieval", "0006_warm_up"),
        ("ops", "0001_metric_rollup_from_retrieval"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="MetricRollup")],
            database_operations=[],
        ),
    ]
