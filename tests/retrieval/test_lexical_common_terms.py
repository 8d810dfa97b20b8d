"""The lexical stage reads a common query's pool of title matches in order from the
titles' own index instead of from the full-text index (retrieval/pg/lexical.py,
SEQUENTIAL_COST), and finds the same pool either way in a table whose rows were never
moved: also when that read stops short and the full-text index reads the pool after all.

The cost model keeps a table this small on the index, so the statements here are made
with other constants; the production statement is checked to take the index here."""

import json

import psycopg
import pytest
from asgiref.sync import sync_to_async

from ingestion.models import Listing
from retrieval.bounds.deadline import Deadline
from retrieval.pg import lexical, vocabulary
from retrieval.pg.lexical import PgLexicalIndex
from retrieval.pg.pool import connection
from retrieval.query.parse import parse_query
from tests.plans import nodes

pytestmark = pytest.mark.django_db(transaction=True)

POOL = 5
ASKED = {
    "text": "drop",
    "pool": POOL,
    "limit": 50,
    "audience": "public",
    "relax_below": 0,  # the pool alone: no partial matches after it
    "excluded": None,
    "exact_first": False,
}


@pytest.fixture
async def common_titles() -> None:
    """Twelve of sixteen titles have "drop"; the others come first in the table."""
    for title in ("Organ recital", "Jazz night", "Choir practice", "Poetry reading"):
        await Listing.objects.acreate(title=title)
    for number in range(12):
        await Listing.objects.acreate(title=f"Drop-in session {number}")
    await sync_to_async(vocabulary.refresh)()


async def _run(
    monkeypatch: pytest.MonkeyPatch, **constants: float
) -> tuple[list[int], dict[str, int]]:
    """The ids the statement made with `constants` ranks; the titles read in order
    ('in order'), and whether they were matched the other way ('index')."""
    for name, value in constants.items():
        monkeypatch.setattr(lexical, name, value)
    statement = lexical.statements()[lexical._WEBSEARCH]
    async with connection(1) as conn, conn.transaction():
        cursor = psycopg.AsyncClientCursor(conn)
        await cursor.execute(statement, ASKED)
        ids = [int(row[0]) for row in await cursor.fetchall()]
        await cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + statement, ASKED)
        (document,) = await cursor.fetchone() or ("[]",)
    (top,) = json.loads(document) if isinstance(document, str) else document
    read = {"in order": 0, "index": 0}
    for node in nodes(top["Plan"]):
        keys = ("Filter", "Join Filter", "Recheck Cond", "Index Cond")
        conditions = " ".join(node[key] for key in keys if key in node)
        if "ts_match_vq" in conditions:
            # The titles read in order are those this node tested, by whichever plan
            # this small table gets.
            removed = ("Rows Removed by Filter", "Rows Removed by Join Filter")
            tested = node["Actual Rows"] + sum(node.get(key, 0) for key in removed)
            read["in order"] += tested * node["Actual Loops"]
        elif "title_vector @@" in conditions and "search_vector" not in conditions:
            # The other way ran: on a table this small the planner may test titles one
            # by one rather than ask the index, as it would for a query this common.
            read["index"] = max(read["index"], int(node["Actual Loops"] > 0))
    return ids, read


async def test_a_common_query_reads_the_table_in_order_and_finds_the_pool_the_index_finds(
    common_titles: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    by_index, index_read = await _run(monkeypatch, SEQUENTIAL_COST=1e9)
    in_order, order_read = await _run(monkeypatch, SEQUENTIAL_COST=0.01)

    assert index_read == {"in order": 0, "index": 1}
    # The four titles without the term, then the first five with it: no index read.
    assert order_read == {"in order": 9, "index": 0}
    assert len(in_order) == POOL
    assert in_order == by_index


async def test_a_read_in_order_that_stops_short_leaves_the_pool_to_the_index(
    common_titles: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    by_index, _ = await _run(monkeypatch, SEQUENTIAL_COST=1e9)
    # Expected share 12/16: five found after about seven rows; allowed two.
    stopped, read = await _run(monkeypatch, SEQUENTIAL_COST=0.01, READ_FACTOR=0.2)

    assert read == {"in order": 2, "index": 1}
    assert stopped == by_index


async def test_the_cost_model_keeps_a_small_table_on_the_index(
    common_titles: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, read = await _run(monkeypatch)

    # Five of twelve: the table's order would cost 5 / 0.75 x 11 rows' worth, more than
    # the index's twelve entries.
    assert read == {"in order": 0, "index": 1}


async def test_a_question_of_many_rare_terms_is_answered(common_titles: None) -> None:
    # Their shares multiplied are far too small to read the table for, or to divide by.
    words = " ".join(f"zq{chr(97 + n // 26)}{chr(97 + n % 26)}" for n in range(30))
    query = parse_query(f"{words} drop", "10")

    found = await PgLexicalIndex().search(query, 50, Deadline.after(5000))

    assert len(found.candidates) == 12  # each "drop" title, a partial match
