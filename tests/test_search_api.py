"""The search API end to end on real Postgres, pgvector, Valkey and the real model."""

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from retrieval import vocabulary
from tests.search_fixtures import search_json

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_search_is_hybrid_and_says_so(
    async_client: AsyncClient, indexed_listings: None
) -> None:
    body = await search_json(async_client, q="jazz", timeout_ms="2000")
    assert body["mode"] == "hybrid"
    assert body["degraded"] is False
    assert body["reasons"] == []
    assert body["index_generation"] is not None
    first = body["results"][0]
    assert first["title"] == "Jazz quartet at the riverside"
    assert first["matched"] == ["lexical", "vector"]
    assert "<mark>" in first["snippet"] or first["snippet"]


async def test_meaning_finds_what_words_do_not(
    async_client: AsyncClient, indexed_listings: None
) -> None:
    body = await search_json(async_client, q="learn to make bread", timeout_ms="2000")
    assert body["results"][0]["title"] == "Sourdough baking class"


@pytest.mark.parametrize(
    ("q", "message"),
    [("", "required"), ("   ", "required"), ("x" * 201, "longer"), ("a\x00b", "control")],
)
async def test_bad_queries_get_a_clear_400(async_client: AsyncClient, q: str, message: str) -> None:
    response = await async_client.get("/api/search", {"q": q})
    assert response.status_code == 400
    assert message in response.json()["error"]


@pytest.mark.parametrize(
    "q",
    ['"unbalanced', "jazz & | ! <-> :*", "'; DROP TABLE ingestion_listing; --", "-jazz or"],
)
async def test_hostile_queries_get_a_normal_answer(
    async_client: AsyncClient, indexed_listings: None, q: str
) -> None:
    body = await search_json(async_client, q=q, timeout_ms="2000")
    assert body["mode"] in {"hybrid", "lexical_fallback", "cache_fallback"}


async def test_a_misspelt_title_is_corrected_from_the_vocabulary(
    async_client: AsyncClient, indexed_listings: None
) -> None:
    await sync_to_async(vocabulary.refresh)()

    body = await search_json(async_client, q="sourdoguh", timeout_ms="2000")
    assert body["results"][0]["title"] == "Sourdough baking class"
    assert "lexical" in body["results"][0]["matched"]
