"""An index generation may be activated by the embedding sweep as soon as it is complete
(`IndexGeneration.activate_when_complete`): what a migration that changes listings under
the active generation asks for (0018), with no operator at hand to run `generations
activate`."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("ingestion", "0016_series_occurrences")]

    operations = [
        migrations.AddField(
            model_name="indexgeneration",
            name="activate_when_complete",
            field=models.BooleanField(db_default=False, default=False),
        ),
    ]
