"""The listing table's trigram index on titles goes: no statement reads it, and every new
listing paid for it.

De-duplication computes `similarity()` on candidates found by their dates or their
normalised title, which no index serves; the spelling corrections and the suggestions
read the vocabulary's own trigram index; the admin's search is `UPPER(title) LIKE`, which
a trigram index on `title` cannot serve. On the 100,000-listing bench data it had been
scanned 0 times, and 5,000 listings went in in 1.9-2.0 s without it against 3.3-3.4 s with
it (docs/benchmarks.md, "A burst applied alone").

Dropped concurrently: a plain DROP INDEX would wait for the searches in flight and make
every later one wait behind it."""

from django.contrib.postgres.operations import RemoveIndexConcurrently
from django.db import migrations


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("ingestion", "0022_listing_lag_observed_at_commit"),
    ]

    operations = [
        RemoveIndexConcurrently(model_name="listing", name="listing_title_trgm"),
    ]
