"""The search API end to end on real Postgres, pgvector, Valkey and the real model (the
page: tests/retrieval/test_search_page.py)."""

import re

import pytest
from asgiref.sync import sync_to_async
from django.db import transaction
from django.test import AsyncClient
from django.utils import timezone

from ingestion.indexing import embed_pending_batch
from ingestion.upsert import apply_draft
from retrieval.pg import vocabulary
from tests.factories import draft, source
from tests.search_fixtures import (
    LEXICAL_TABLE,
    VECTOR_TABLE,
    about_results,
    search_json,
    tables_locked,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.usefixtures("patient_search")
async def test_a_search_is_hybrid_and_says_so(async_client: AsyncClient, warmed_up: None) -> None:
    body = await search_json(async_client, q="jazz", timeout_ms="2000")
    assert body["mode"] == "hybrid"
    assert body["degraded"] is False
    assert about_results(body["reasons"]) == []
    assert body["index_generation"] is not None
    first = body["results"][0]
    assert first["title"] == "Jazz quartet at the riverside"
    assert first["matched"] == ["lexical", "vector"]
    assert "<mark>jazz</mark>" in first["snippet"]


@pytest.mark.usefixtures("patient_search")
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


def _add_listing(title: str, description: str) -> None:
    with transaction.atomic():
        apply_draft(
            source("Another feed"),
            draft("extra", title=title, description=description),
            timezone.now(),
        )
    while embed_pending_batch():
        pass


async def test_a_snippet_marks_the_match_and_escapes_the_listing_s_own_markup(
    async_client: AsyncClient, warmed_up: None
) -> None:
    await sync_to_async(_add_listing)(
        "Harpsichord evening",
        'Baroque <script>alert("x")</script> harpsichord & lute.',
    )

    body = await search_json(async_client, q="harpsichord", timeout_ms="2000")
    snippet = body["results"][0]["snippet"]
    assert "<mark>harpsichord</mark>" in snippet
    assert "&amp; lute" in snippet
    assert "alert(&quot;x&quot;)" in snippet
    assert re.sub(r"</?mark>", "", snippet).count("<") == 0  # no markup but our marks


async def test_no_stage_in_time_is_a_503_with_retry_after(
    async_client: AsyncClient, warmed_up: None, test_database_url: str
) -> None:
    async with tables_locked(test_database_url, LEXICAL_TABLE, VECTOR_TABLE):
        api = await async_client.get("/api/search", {"q": "jazz"})

    assert api.status_code == 503
    assert int(api["Retry-After"]) >= 1
    body = api.json()
    assert "lexical_timeout" in body["reasons"]
    assert {"vector_timeout", "embed_timeout"} & set(body["reasons"])
    assert "results" not in body


async def test_the_caller_s_own_deadline_passing_first_is_a_504_with_retry_after(
    async_client: AsyncClient, warmed_up: None, test_database_url: str
) -> None:
    async with tables_locked(test_database_url, LEXICAL_TABLE, VECTOR_TABLE):
        response = await async_client.get("/api/search", {"q": "jazz", "timeout_ms": "50"})

    assert response.status_code == 504
    assert int(response["Retry-After"]) >= 1
    assert "results" not in response.json()
