"""Who withdrew a listing: an editor's withdrawal holds against the sources' next polls,
which until now set every changed listing active again."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("ingestion", "0009_editor_and_ops_roles"),
    ]

    operations = [
        migrations.AddField(
            model_name="listing",
            name="withdrawn_by_editor",
            field=models.BooleanField(default=False),
        ),
    ]
