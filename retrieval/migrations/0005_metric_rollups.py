# The ops page's history (retrieval/rollups.py): per-minute increases of each process's
# own metrics, kept two days.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("retrieval", "0004_term_statistics"),
    ]

    operations = [
        migrations.CreateModel(
            name="MetricRollup",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("minute", models.DateTimeField()),
                ("metric", models.CharField(max_length=100)),
                ("labels", models.JSONField(default=dict)),
                ("value", models.FloatField()),
            ],
            options={
                "db_table": "retrieval_metric_rollup",
                "indexes": [models.Index(fields=["minute"], name="retrieval_rollup_minute")],
            },
        ),
    ]
