"""An index of active listings' title terms beside their ids, which the lexical stage
reads a common query's title matches from in order (retrieval/pg/lexical.py): reading the
table itself walked each row's description and its search vector to reach the title's,
15 ms for the 18,000 rows "drop open house" takes at 1,000,000 listings, against 5 ms
from this index (docs/decisions/common-queries-read-titles-in-order.md).

Built concurrently: a plain CREATE INDEX would hold every write to the listings until it
is built."""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("ingestion", "0024_retired_generations_backfill_marks"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="listing",
            index=models.Index(
                condition=models.Q(("status", "active")),
                fields=["audience", "id"],
                include=("title_vector",),
                name="listing_active_titles",
            ),
        ),
    ]
