"""Pinned statements per search, counted at the psycopg layer and told apart by the tag
that opens each one's text (retrieval/pg/statement.py), as the admin pages' query counts
are pinned (tests/admin/test_query_counts.py): a stage that starts sending a statement per
candidate, or a lookup that stops being cached, changes a count here."""

import re
from collections import Counter
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient
from psycopg import AsyncClientCursor

from retrieval import service
from retrieval.pg import facets, vocabulary
from tests.search_fixtures import search_json

pytestmark = pytest.mark.django_db(transaction=True)

_TAG = re.compile(r"/\* searchsite:([a-z_-]+) \*/")


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Statements sent meanwhile, by tag (every hot-path statement goes through an
    AsyncClientCursor; the cursor has no hook of its own)."""
    sent: Counter[str] = Counter()
    execute = AsyncClientCursor.execute

    async def counting(cursor: AsyncClientCursor[Any], query: Any, *args: Any, **kw: Any) -> Any:
        tag = _TAG.match(str(query))
        sent[tag.group(1) if tag else "untagged"] += 1
        return await execute(cursor, query, *args, **kw)

    monkeypatch.setattr(AsyncClientCursor, "execute", counting)
    return sent


@pytest.mark.usefixtures("patient_search", "warmed_up")
@pytest.mark.parametrize(
    ("q", "expected"),
    [
        # Full matches fill less than the candidates asked for, so partial matches are
        # read in the same statement; then the vector search; then the page's rows.
        ("jazz", {"lexical": 1, "vector": 1, "listings": 1}),
        # A misspelt word: the first statement finds nothing, the vocabulary is asked
        # for corrections, and the corrected word is searched.
        ("sourdoguh", {"lexical": 3, "vector": 1, "listings": 1}),
        # Nothing to correct it to: no third statement.
        ("xqzvw", {"lexical": 2, "vector": 1, "listings": 1}),
    ],
)
async def test_one_search_sends_a_fixed_set_of_statements(
    async_client: AsyncClient, statements: Counter[str], q: str, expected: dict[str, int]
) -> None:
    await sync_to_async(vocabulary.refresh)()
    facets.forget()
    statements.clear()
    body = await search_json(async_client, q=q, timeout_ms="2000")
    assert body["mode"] == "hybrid"
    # The counts on the filters, beside the search: one statement, or none if the results
    # came first and they were cancelled before it was sent (retrieval/search.py).
    assert statements.pop("facets", 0) <= 1
    assert dict(statements) == expected


@pytest.mark.usefixtures("patient_search", "warmed_up")
async def test_the_active_generation_is_asked_once_a_second_not_once_a_search(
    async_client: AsyncClient, statements: Counter[str]
) -> None:
    service.forget_searchable_generation()
    statements.clear()
    for _ in range(3):
        assert (await search_json(async_client, q="jazz", timeout_ms="2000"))["mode"] == "hybrid"
    assert statements["generation"] == 1
    assert statements["vector"] == statements["listings"] == 3
