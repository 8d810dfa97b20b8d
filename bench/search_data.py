"""100,000 listings with realistic text and real MiniLM vectors, built quickly.

Embedding 100,000 texts would take a quarter of an hour here, so 2,000 base listings are
embedded for real and each synthetic listing combines two of them: its title joins words
of both titles, its vector is the normalised mean of both vectors plus a little noise. The
texts and vectors stay consistent with each other, which is what both branches need."""

import io
import random
from typing import Any

import numpy as np
from django.db import connection

from ingestion.embedding import DIMENSIONS, get_embedder
from ingestion.text import embedding_text
from retrieval.pg import vocabulary

BASE = 2000
_LISTING_DEFAULTS = "\t".join(
    [
        "{}",
        "",
        "f",
        "",
        "active",
        "2026-11-29T00:00:00Z",
        "2026-11-29T00:00:00Z",
        "1",
        "editorial",
        "public",
        "f",
    ]
)


def build(
    count: int, base_records: list[dict[str, object]], generation: int, seed: int = 11
) -> bool:
    """Builds the listings unless exactly these are there already; True when built."""
    if _already_built(count, generation):
        return False
    rng = random.Random(seed)
    base = base_records[:BASE]
    texts = [
        embedding_text(str(r["title"]), str(r["venue"]), [], str(r["description"])[:300])
        for r in base
    ]
    vectors = get_embedder().embed_documents(texts)
    noise = np.random.default_rng(seed)
    listings, embeddings = io.StringIO(), io.StringIO()
    for number in range(1, count + 1):
        a, b = rng.randrange(len(base)), rng.randrange(len(base))
        words_a, words_b = str(base[a]["title"]).split(), str(base[b]["title"]).split()
        title = " ".join(words_a[: max(1, len(words_a) // 2 + 1)] + words_b[len(words_b) // 2 :])
        description = f"{str(base[a]['description'])[:200]} {str(base[b]['description'])[:100]}"
        vector = 0.7 * vectors[a] + 0.3 * vectors[b] + noise.normal(0, 0.01, DIMENSIONS)
        vector /= np.linalg.norm(vector)
        listings.write(
            "\t".join(
                [
                    str(number),
                    _clean(title),
                    _clean(description),
                    _clean(str(base[a]["venue"])),
                    _LISTING_DEFAULTS,
                ]
            )
            + "\n"
        )
        text = ",".join(f"{x:.5f}" for x in vector)
        embeddings.write(f"{number}\t{generation}\t[{text}]\t1\t2026-11-29T00:00:00Z\n")
    _copy(listings, embeddings)
    return True


# Every listing gets a start, spread evenly and in no relation to its text over a year
# that has not begun yet, so a date window selects a known share of listings (the
# filtered figures of bench/search.py) and the default filter (not ended) keeps them all.
DATED_FROM = "2027-01-01T00:00:00Z"
DATED_DAYS = 360


def date_listings() -> None:
    """Give every undated listing its start (idempotent; bench databases built before
    listings were dated get theirs here)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE ingestion_listing SET starts_at = %s::timestamptz"
            " + (id * 7919 %% 100000) * (%s * interval '1 day' / 100000)"
            " WHERE starts_at IS NULL",
            [DATED_FROM, DATED_DAYS],
        )
        if cursor.rowcount:  # as many dead rows as it dated: vacuumed, as after the build
            _vacuum(cursor)


def _already_built(count: int, generation: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT count(*) FROM ingestion_listing),"
            " (SELECT count(*) FROM ingestion_listing_embedding WHERE generation_id = %s)",
            [generation],
        )
        listings, embeddings = cursor.fetchone()
    if listings and (listings, embeddings) != (count, count):
        raise SystemExit(f"the database holds {listings} other listings: use a fresh --data-dir")
    return int(listings) == count


def _vacuum(cursor: Any) -> None:
    """VACUUM, not only ANALYZE: rows just written carry no hint bits and no page is
    all-visible, so a search's first read of a row wrote its page back, and rows an UPDATE
    replaced were read through (a fresh build, then dated, measured 140 ms of Postgres CPU
    a search; 10.5 ms once vacuumed)."""
    for table in (
        "ingestion_listing",
        "ingestion_listing_embedding",
        "ingestion_embedding_candidate",
    ):
        cursor.execute(f"VACUUM (ANALYZE) {table}")


def _clean(text: str) -> str:
    return " ".join(text.replace("\\", " ").split())[:480]


def _copy(listings: io.StringIO, embeddings: io.StringIO) -> None:
    raw = connection.connection  # psycopg's own connection: COPY is far faster than INSERTs
    with raw.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '512MB'")
        with cursor.copy(
            "COPY ingestion_listing (id, title, description, venue, aliases, timezone,"
            " all_day, url, status, created_at, updated_at, content_version, fetched_kind,"
            " audience, withdrawn_by_editor)"
            " FROM STDIN"
        ) as copy:
            copy.write(listings.getvalue())
        cursor.execute(
            "SELECT setval('ingestion_listing_id_seq', (SELECT max(id) FROM ingestion_listing))"
        )
        with cursor.copy(
            "COPY ingestion_listing_embedding (listing_id, generation_id, embedding,"
            " content_version, embedded_at) FROM STDIN"
        ) as copy:
            copy.write(embeddings.getvalue())
        # The listings' trigger marked each an embedding candidate (migrations/0012), and
        # their vectors came by COPY, not through a claim that would have settled them:
        # left, every lag read and claim of the first run probes all 100,000.
        cursor.execute("DELETE FROM ingestion_embedding_candidate")
        _vacuum(cursor)
        for view in vocabulary.VIEWS:
            cursor.execute(f"REFRESH MATERIALIZED VIEW {view}")
    raw.commit()
