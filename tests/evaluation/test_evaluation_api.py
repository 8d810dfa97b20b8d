"""GET /api/evaluation/search: the public search's code over an evaluation set's own
listings, opened only by a token of the set's source, with the budgets the caller asks
for, and invisible to the public retrieval metrics and the public vector breaker."""

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction
from django.test import AsyncClient
from django.utils import timezone

from evaluation import views
from evaluation.models import EvaluationSet
from evaluation.paths import MAX_QUERY_CHARS
from ingestion import generations
from ingestion.embedding import DIMENSIONS, MODEL_NAME
from ingestion.indexing import embed_pending_batch
from ingestion.models import ApiToken, Audience, Listing, Source
from ingestion.tokens import create_token
from ingestion.upsert import apply_draft
from resilience.redis_clients import get_redis
from retrieval import service
from tests.factories import draft
from tests.scraping import scrape
from tests.search_fixtures import about_results, embeddings_locked, search_json

pytestmark = pytest.mark.django_db(transaction=True)

URL = "/api/evaluation/search"
JUDGED = {
    "d1": "Aeroelastic models of heated high speed aircraft",
    "d2": "Boundary layer transition on a flat plate at supersonic speed",
}
# Generous: these tests are about what is searched and counted, not about time.
AMPLE = {"deadline_ms": "5000", "vector_budget_ms": "4000"}
PUBLIC_RETRIEVAL_COUNTERS = (
    "retrieval_started_total",
    "retrieval_completed_total",
    "retrieval_unavailable_total",
    "retrieval_degradation_reasons_total",
    "retrieval_vector_eligible_total",
    "retrieval_vector_budget_exhausted_total",
    "retrieval_local_deadline_exhausted_total",
    "retrieval_stage_seconds_count",
    "retrieval_request_seconds_count",
)


TINY = Audience.of_evaluation_set("tiny")


def _judged_set() -> tuple[str, dict[str, int]]:
    """An evaluation set of two documents, embedded in the evaluation generation: a token
    of its source, and each document's listing id."""
    generations.ensure_active_generation(MODEL_NAME, DIMENSIONS, TINY)
    source = Source.objects.create(
        name="evaluation: tiny", kind=Source.Kind.EDITORIAL, url="", audience=TINY
    )
    with transaction.atomic():
        for document, title in JUDGED.items():
            apply_draft(
                source,
                draft(document, title=title, venue="", description=title, starts_at=None),
                timezone.now(),
            )
    while embed_pending_batch():
        pass
    EvaluationSet.objects.create(
        name="tiny", layout="beir", source=source, imported_at=timezone.now()
    )
    listing_of = {
        document: Listing.objects.get(records__source=source, records__external_id=document).pk
        for document in JUDGED
    }
    return create_token("sweep", source), listing_of


@pytest.fixture
async def judged(warmed_up: None) -> AsyncIterator[tuple[str, dict[str, int]]]:
    """The public search fixtures (warmed up) and the tiny evaluation set beside them."""
    yield await sync_to_async(_judged_set)()
    await sync_to_async(views.forget_wiring)()


def _public_breaker_calls() -> int:
    """The outcomes the public vector breaker's window holds, once handed over."""
    service.vector_gate().flush()
    redis = get_redis()
    return sum(
        int(redis.get(key) or 0) for key in redis.scan_iter("searchsite:breaker:vector:calls:*")
    )


async def _search(
    client: AsyncClient, token: str | None, **params: str
) -> tuple[int, dict[str, Any]]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    response = await client.get(URL, params, headers=headers)
    return response.status_code, json.loads(response.content)


async def test_it_requires_a_token_of_an_evaluation_sets_source(
    async_client: AsyncClient, judged: tuple[str, dict[str, int]]
) -> None:
    public = await Source.objects.acreate(name="Editorial desk", kind=Source.Kind.EDITORIAL)
    # An evaluation-audience source of no set (the sweep's ingest stream) opens nothing.
    stream = await Source.objects.acreate(
        name="evaluation: sweep stream", kind=Source.Kind.EDITORIAL, audience=TINY
    )
    public_token = await sync_to_async(create_token)("desk", public)
    stream_token = await sync_to_async(create_token)("stream", stream)
    set_source = await Source.objects.aget(name="evaluation: tiny")
    revoked = await sync_to_async(create_token)("revoked", set_source)
    await ApiToken.objects.filter(name="revoked").aupdate(revoked=True)
    good, _ = judged
    for wrong in ("Basic " + good, good):  # another scheme; no scheme at all
        response = await async_client.get(URL, {"q": "aircraft"}, headers={"Authorization": wrong})
        assert response.status_code == 401
    for token in (None, "not-a-token", public_token, stream_token, revoked):
        status, body = await _search(async_client, token, q="aircraft", **AMPLE)
        assert status == 401, (token, body)
        assert "documents" not in body


async def test_it_finds_an_evaluation_document_a_public_search_cannot(
    async_client: AsyncClient, judged: tuple[str, dict[str, int]]
) -> None:
    token, listing_of = judged
    status, body = await _search(async_client, token, q="heated aircraft models", k="5", **AMPLE)
    assert status == 200, body
    assert body["mode"] == "hybrid"
    assert body["documents"][0] == "d1"
    assert body["results"][0]["id"] == listing_of["d1"]
    assert [r["id"] for r in body["results"]] == [listing_of[d] for d in body["documents"]]
    assert body["index_generation"] is not None
    assert {"lexical_ms", "vector_ms", "total_ms"} <= set(body["timings_ms"])
    public = await search_json(async_client, q="heated aircraft models", timeout_ms="1000")
    assert public["index_generation"] != body["index_generation"]
    assert not {r["id"] for r in public["results"]} & set(listing_of.values())


async def test_the_budgets_asked_for_are_the_budgets_searched_with(
    async_client: AsyncClient, judged: tuple[str, dict[str, int]]
) -> None:
    token, _ = judged
    # Below the configured minimum (5 ms): the vector stage is not even started.
    status, body = await _search(
        async_client, token, q="aircraft", vector_budget_ms="1", deadline_ms="5000"
    )
    assert (status, body["mode"], body["reasons"]) == (200, "lexical_fallback", ["no_budget"])
    assert body["documents"] == ["d1"]
    # A deadline shorter than the reserve leaves neither stage any time: a 503 that says
    # so, and when to come back.
    response = await async_client.get(
        URL, {"q": "aircraft", "deadline_ms": "10"}, headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 503
    assert json.loads(response.content)["reasons"] == ["no_budget", "lexical_timeout"]
    assert response["Retry-After"] == "1"
    status, body = await _search(async_client, token, q="aircraft", **AMPLE)
    assert (status, body["mode"], body["reasons"]) == (200, "hybrid", [])


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"vector_budget_ms": "abc"}, "vector_budget_ms"),
        ({"vector_budget_ms": "-1"}, "vector_budget_ms"),
        ({"deadline_ms": "30001"}, "deadline_ms"),
        ({"deadline_ms": "nan"}, "deadline_ms"),
        ({"q": "x" * (MAX_QUERY_CHARS + 1)}, f"{MAX_QUERY_CHARS} characters"),
    ],
)
async def test_bad_budgets_and_queries_get_a_400_naming_them(
    async_client: AsyncClient,
    judged: tuple[str, dict[str, int]],
    params: dict[str, str],
    named: str,
) -> None:
    token, _ = judged
    status, body = await _search(async_client, token, **({"q": "aircraft"} | params))
    assert status == 400
    assert named in body["error"]


async def test_a_query_longer_than_the_public_limit_is_searched(
    async_client: AsyncClient, judged: tuple[str, dict[str, int]]
) -> None:
    token, _ = judged
    long_query = "heated aircraft models " * 20  # 460 characters; the public API takes 200
    status, body = await _search(async_client, token, q=long_query, **AMPLE)
    assert status == 200, body
    assert body["documents"][0] == "d1"


async def test_it_moves_neither_the_public_metrics_nor_the_public_breaker(
    async_client: AsyncClient, judged: tuple[str, dict[str, int]], test_database_url: str
) -> None:
    token, _ = judged
    public_calls = await sync_to_async(_public_breaker_calls)()
    before = await scrape(async_client)
    assert (await _search(async_client, token, q="aircraft", **AMPLE))[1]["mode"] == "hybrid"
    assert (await _search(async_client, token, q="aircraft", vector_budget_ms="1"))[0] == 200
    async with embeddings_locked(test_database_url):
        status, body = await _search(
            async_client, token, q="supersonic plate", deadline_ms="3000", vector_budget_ms="50"
        )
    assert (status, body["reasons"]) == (200, ["vector_timeout"])
    after = await scrape(async_client)
    for counter in PUBLIC_RETRIEVAL_COUNTERS:
        assert after.total_since(before, counter) == 0, counter
    assert after.value("retrieval_vector_breaker_open") == before.value(
        "retrieval_vector_breaker_open"
    )
    # The timeout went to the evaluation breaker, and nothing to the public one.
    await sync_to_async(views.vector_gate().flush)()
    redis = get_redis()
    assert list(redis.scan_iter(f"{views.BREAKER_KEY}:failures:*"))
    assert await sync_to_async(_public_breaker_calls)() == public_calls
    # The scrape can see a public search move them: the zeros above are not blindness.
    await search_json(async_client, q="jazz", timeout_ms="1000")
    moved = await scrape(async_client)
    assert moved.total_since(after, "retrieval_started_total") == 1


async def test_an_open_evaluation_breaker_leaves_the_public_search_and_gauge_alone(
    async_client: AsyncClient, judged: tuple[str, dict[str, int]]
) -> None:
    token, _ = judged
    gate = views.vector_gate()
    for _ in range(settings.VECTOR_BREAKER_MIN_CALLS):
        gate.record(failed=True)
    await sync_to_async(gate.flush)()
    status, body = await _search(async_client, token, q="aircraft", **AMPLE)
    assert (status, body["reasons"]) == (200, ["breaker_open"])
    assert (await scrape(async_client)).value("retrieval_vector_breaker_open") == 0
    public = await search_json(async_client, q="jazz", timeout_ms="1000")
    assert (public["mode"], about_results(public["reasons"])) == ("hybrid", [])
