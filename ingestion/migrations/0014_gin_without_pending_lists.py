"""The listing table's GIN indexes take each insert directly, not into a pending list
(`fastupdate` off).

With the pending list on (Postgres' default), a new listing's entries went to an unsorted
list of up to 4 MB, which every search of that index scans whole, and which is merged
into the index by whoever finds it full, or by autovacuum. Under the soak's feed (62
listings/s) autovacuum's ANALYZE of the table merged it once every minute or two, and
for the 1.6 s it took every lexical statement ran past its statement_timeout: the soak's
minutes with a p99 of 150-160 ms and 503s came back at the same minutes run after run
(docs/decisions/listing-gin-indexes-keep-no-pending-list.md).

The indexes are altered in place, not rebuilt, and what their lists hold now is merged
here, in the migration, rather than by the first insert after it."""

from django.contrib.postgres.indexes import GinIndex
from django.db import migrations

INDEXES = {
    "listing_search_vector_gin": {"fields": ["search_vector"]},
    "listing_title_vector_gin": {"fields": ["title_vector"]},
    "listing_title_trgm": {"fields": ["title"], "opclasses": ["gin_trgm_ops"]},
    "listing_venue_terms_gin": {"fields": ["venue_terms"]},
    "listing_source_kinds_gin": {"fields": ["source_kinds"]},
}


def _alter(fastupdate: str) -> str:
    return "".join(
        f"ALTER INDEX {name} SET (fastupdate = {fastupdate});"
        f" SELECT gin_clean_pending_list('{name}'::regclass);"
        for name in INDEXES
    )


def _state() -> list[migrations.operations.base.Operation]:
    return [
        operation
        for name, options in INDEXES.items()
        for operation in (
            migrations.RemoveIndex(model_name="listing", name=name),
            migrations.AddIndex(
                model_name="listing",
                index=GinIndex(name=name, fastupdate=False, **options),
            ),
        )
    ]


class Migration(migrations.Migration):
    dependencies = [("ingestion", "0013_backfill_candidates")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(_alter("off"), _alter("on"))],
            state_operations=_state(),
        )
    ]
