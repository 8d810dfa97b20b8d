# The lexical lag is observed as a batch commits (ingestion/batches.py), no longer stamped on
# each listing by a second write after the commit. Dropping a column only marks it dropped:
# no table rewrite.

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("ingestion", "0021_generation_vector_type"),
    ]

    operations = [
        migrations.RemoveField(
            model_name="listing",
            name="lexically_searchable_at",
        ),
    ]
