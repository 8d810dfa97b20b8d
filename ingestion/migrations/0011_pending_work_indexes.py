"""Covering indexes for finding the listings still to embed. Without them the embedding
lag (every /metrics scrape and /healthz) and every claim of the embedding worker read both
tables whole: at 100,000 listings 600 MB and about 250 ms on three processes each time.

Built concurrently: the tables are live, and a plain CREATE INDEX would hold off every
write to them (polls, embedding) while it builds."""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("ingestion", "0010_listing_withdrawn_by_editor"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="listing",
            index=models.Index(
                condition=models.Q(("status", "active")),
                fields=["audience", "id"],
                include=("content_version", "fetched_at"),
                name="listing_active_versions",
            ),
        ),
        AddIndexConcurrently(
            model_name="listingembedding",
            index=models.Index(
                fields=["generation", "listing"],
                include=("content_version",),
                name="listing_embedding_versions",
            ),
        ),
    ]
