"""The lexical stage's BM25 (retrieval/pg/lexical.py) against scores worked by hand, over
real Postgres: a rare term outranks a common one, a long listing does not win by its
length, the statistics follow listings added and withdrawn, and the prepared statement's
plan does not depend on what it is asked.

Listings here have titles only (weight 1), each word a token, so that a term's frequency
is its count and a listing's length its number of words (no stop words among them)."""

import json
import math
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from psycopg import sql

from ingestion.models import Listing
from retrieval.bounds.deadline import Deadline
from retrieval.pg import lexical as pg_lexical
from retrieval.pg import vocabulary
from retrieval.pg.lexical import PgLexicalIndex
from retrieval.pg.pool import connection
from retrieval.query.parse import parse_query
from tests.plans import nodes

pytestmark = pytest.mark.django_db(transaction=True)

K1, B = pg_lexical.RANKING.k1, pg_lexical.RANKING.b


def idf(documents: int, with_term: int) -> float:
    return math.log(1 + (documents - with_term + 0.5) / (with_term + 0.5))


def saturated(frequency: float, length: float, average_length: float) -> float:
    return frequency * (K1 + 1) / (frequency + K1 * (1 - B + B * length / average_length))


async def titled(*titles: str, refresh: bool = True) -> list[int]:
    made = [await Listing.objects.acreate(title=title) for title in titles]
    if refresh:  # what the beat task does every few minutes
        await sync_to_async(vocabulary.refresh)()
    return [listing.pk for listing in made]


async def scores(text: str) -> dict[int, float]:
    """Listing -> score, best first."""
    found = await PgLexicalIndex().search(parse_query(text, "10"), 10, Deadline.after(5000))
    return {c.listing_id: c.score for c in found.candidates}


async def test_a_rare_term_outranks_a_common_one() -> None:
    organ, *jazz = await titled("Organ recital", "Jazz recital", "Jazz night", "Jazz club")

    found = await scores("organ jazz")

    # No listing has both: each is a partial match, scored by its one term. Every
    # listing is two words long, the average: the frequency part is 1.
    assert list(found) == [organ, *jazz]
    assert found[organ] == pytest.approx(idf(4, 1))  # 1.20
    assert [found[j] for j in jazz] == pytest.approx([idf(4, 3)] * 3)  # 0.36


async def test_a_long_listing_does_not_win_by_its_length() -> None:
    # The long one first: by id, it would win a tie.
    long, short = await titled(
        "Organ alpha beta gamma delta epsilon zeta theta iota kappa", "Organ recital"
    )

    found = await scores("organ")

    assert list(found) == [short, long]
    average = (10 + 2) / 2
    assert found[short] == pytest.approx(idf(2, 2) * saturated(1, 2, average))
    assert found[long] == pytest.approx(idf(2, 2) * saturated(1, 10, average))


async def test_a_term_repeated_in_a_listing_counts_less_each_time() -> None:
    once, thrice = await titled("Organ recital tonight", "Organ organ organ")

    found = await scores("organ")

    assert found[thrice] == pytest.approx(idf(2, 2) * saturated(3, 3, 3))
    assert found[thrice] < 3 * found[once]


async def test_the_statistics_follow_listings_added_and_withdrawn() -> None:
    organ, jazz = await titled("Organ recital", "Jazz night")
    assert await scores("organ jazz") == pytest.approx({organ: idf(2, 1), jazz: idf(2, 1)})

    added = await titled("Jazz club", "Jazz brunch")
    found = await scores("organ jazz")
    assert found[organ] == pytest.approx(idf(4, 1))
    assert found[jazz] == pytest.approx(idf(4, 3))

    await Listing.objects.filter(pk__in=added).aupdate(status=Listing.Status.WITHDRAWN)
    await sync_to_async(vocabulary.refresh)()
    assert await scores("organ jazz") == pytest.approx({organ: idf(2, 1), jazz: idf(2, 1)})


async def test_a_term_newer_than_the_statistics_counts_as_the_rarest() -> None:
    await titled("Organ recital", "Jazz night")
    (theremin,) = await titled("Theremin night", refresh=False)

    found = await scores("theremin")

    # Two listings at the last refresh, none with the term: idf(2, 0), the highest.
    assert found == pytest.approx({theremin: idf(2, 0)})


def _scans(plan: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """Each relation or index the plan reads, by how."""
    for node in nodes(plan):
        if "Relation Name" in node or "Index Name" in node:
            yield node["Node Type"], node.get("Index Name", node.get("Relation Name", ""))


async def test_the_prepared_statement_plans_alike_whatever_it_is_asked() -> None:
    await titled("Organ recital", "Jazz night", "Jazz club")
    name, _ = pg_lexical._PREPARED[pg_lexical._WEBSEARCH]
    plans = []
    async with connection(1) as conn:
        # Statistics of these rows, not of whatever earlier tests left behind.
        await conn.execute(
            "ANALYZE ingestion_listing, retrieval_term_statistics, retrieval_corpus_statistics"
        )
    async with connection(1) as conn, conn.transaction():
        # The test's tables are a few rows: left to itself the planner reads them whole.
        await conn.execute("SET LOCAL enable_seqscan = off")
        for mode, asked in (
            ("force_generic_plan", ("jazz", 500, 50, "public", 10, None, False)),
            ("force_custom_plan", ("jazz", 500, 50, "public", 10, None, False)),
            ("force_custom_plan", ('organ -jazz "night"', 500, 50, "public", 0, "jazz", True)),
        ):
            await conn.execute(sql.SQL("SET LOCAL plan_cache_mode = {}").format(sql.SQL(mode)))
            explain = sql.SQL("EXPLAIN (FORMAT JSON) EXECUTE {}({})").format(
                sql.Identifier(name), sql.SQL(", ").join(map(sql.Literal, asked))
            )
            cursor = await conn.execute(explain)
            (document,) = await cursor.fetchone() or ("[]",)
            (top,) = json.loads(document) if isinstance(document, str) else document
            plans.append(top["Plan"])

    # What it is asked never changes what the plan reads or how, and the plan made once,
    # for any text, costs no more than one made for a text of its own: Postgres keeps a
    # generic plan only then (the stage forces generic plans; see lexical.py).
    generic, *custom = plans
    scans = sorted(_scans(generic))
    assert all(sorted(_scans(plan)) == scans for plan in custom)
    assert all(generic["Total Cost"] <= 1.1 * plan["Total Cost"] for plan in custom)
    assert ("Index Scan", "retrieval_corpus_statistics_audience") in scans
