"""What GET /metrics exports after searches and ingestion caused it: the vector stage's
exhausted-budget ratio and remaining budget, degradation reasons, cache warming, and the
lag from fetch to searchable. Counters are process-wide, so each test compares a scrape
after with one before."""

from collections import Counter
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient, Client
from django.utils import timezone

from ingestion import generations
from ingestion.embedding import DIMENSIONS, MODEL_NAME
from ingestion.indexing import embed_pending_batch
from ingestion.polling import ingest_payload
from resilience.redis_clients import get_redis
from retrieval.cache import cache_key
from retrieval.query.parse import parse_query
from retrieval.warming import run as warming_run
from retrieval.warming.schedule import schedule_warming
from tests.conftest import PATIENT_VECTOR_BUDGET_MS, SHORT_TIMEOUT_MS, eventually
from tests.factories import source
from tests.feeds import rss
from tests.scraping import scrape, scrape_sync
from tests.search_fixtures import (
    LEXICAL_TABLE,
    VECTOR_TABLE,
    about_results,
    embeddings_locked,
    index_listings,
    search_json,
    tables_locked,
)


@pytest.mark.django_db(transaction=True)
async def test_the_exhausted_budget_ratio_counts_eligible_and_exhausted_vector_stages(
    async_client: AsyncClient, patient_search: None, warmed_up: None, test_database_url: str
) -> None:
    before = await scrape(async_client)
    in_time = await search_json(async_client, q="organ recital")
    async with embeddings_locked(test_database_url):
        # The same query: its embedding is cached, so the stage reaches its statement.
        late = await search_json(async_client, q="organ recital", timeout_ms=SHORT_TIMEOUT_MS)
    after = await scrape(async_client)

    assert in_time["mode"] == "hybrid"
    assert about_results(late["reasons"]) == ["vector_timeout"]
    assert after.since(before, "retrieval_vector_eligible_total") == 2
    assert after.since(before, "retrieval_vector_budget_exhausted_total") == 1
    assert after.since(before, "retrieval_local_deadline_exhausted_total", stage="vector") == 1


@pytest.mark.django_db(transaction=True)
async def test_the_remaining_budget_is_what_an_in_time_vector_stage_left(
    async_client: AsyncClient, patient_search: None, warmed_up: None
) -> None:
    before = await scrape(async_client)
    body = await search_json(async_client, q="organ recital")
    after = await scrape(async_client)

    assert body["mode"] == "hybrid"
    name = "retrieval_vector_remaining_budget_seconds"
    assert after.since(before, f"{name}_count") == 1
    # A warmed-up search uses a few milliseconds of its five seconds: what is left, not
    # what was used, is recorded.
    left_s = after.since(before, f"{name}_sum")
    assert PATIENT_VECTOR_BUDGET_MS / 2000 < left_s <= PATIENT_VECTOR_BUDGET_MS / 1000


@pytest.mark.django_db(transaction=True)
async def test_each_degradation_reason_is_counted_as_the_responses_gave_it(
    async_client: AsyncClient, warmed_up: None, test_database_url: str
) -> None:
    before = await scrape(async_client)
    async with embeddings_locked(test_database_url):
        degraded = await search_json(async_client, q="jazz")
    async with tables_locked(test_database_url, LEXICAL_TABLE, VECTOR_TABLE):
        unavailable = await async_client.get("/api/search", {"q": "organ recital"})
    after = await scrape(async_client)

    assert unavailable.status_code == 503
    given = Counter(degraded["reasons"] + unavailable.json()["reasons"])
    assert given["vector_timeout"] + given["embed_timeout"] == 2
    assert given["lexical_timeout"] == 1
    for reason in ("vector_timeout", "embed_timeout", "lexical_timeout", "breaker_open"):
        counted = after.since(before, "retrieval_degradation_reasons_total", reason=reason)
        assert counted == given[reason], reason
    assert after.since(before, "retrieval_unavailable_total", query_class="short") == 1


@pytest.mark.django_db(transaction=True)
async def test_a_timed_out_search_enqueues_warming_once_per_query(
    async_client: AsyncClient, warmed_up: None, test_database_url: str
) -> None:
    before = await scrape(async_client)

    async def counted(event: str, expected: int) -> bool:
        now = await scrape(async_client)
        return now.since(before, "retrieval_cache_warming_total", event=event) == expected

    async with embeddings_locked(test_database_url):
        assert "vector_timeout" in (await search_json(async_client, q="jazz"))["reasons"]
        # Warming may be enqueued behind the response, so it is waited for, boundedly.
        await eventually(lambda: counted("enqueued", 1), 5, "warming enqueued")
        await search_json(async_client, q="  JAZZ ")  # the same cache key
        await eventually(lambda: counted("deduplicated", 1), 5, "warming deduplicated")
    assert await counted("enqueued", 1)


@pytest.mark.django_db(transaction=True)  # the lexical lag is recorded on commit
def test_the_lag_from_fetch_to_searchable_is_measured_from_the_fetch(client: Client) -> None:
    generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
    feed = source()
    payload = rss([("a", "Jazz quartet", "Bebop."), ("b", "Organ recital", "Bach.")])
    fetched_s_ago = 30
    before = scrape_sync(client)
    ingest_payload(feed, payload, started_at=timezone.now() - timedelta(seconds=fetched_s_ago))
    lexical = scrape_sync(client)
    while embed_pending_batch():
        pass
    vector = scrape_sync(client)

    assert lexical.since(before, "ingestion_items_total", kind="feed", outcome="new") == 2
    for name, after in (
        ("ingestion_fetch_to_lexical_seconds", lexical),
        ("ingestion_fetch_to_vector_seconds", vector),
    ):
        assert after.since(before, f"{name}_count", kind="feed") == 2, name
        # Both listings were fetched 30 s ago and became searchable within this test.
        lag_s = after.since(before, f"{name}_sum", kind="feed")
        assert 2 * fetched_s_ago <= lag_s < 2 * (fetched_s_ago + 60), name


@pytest.mark.django_db
def test_the_open_quarantine_is_read_from_the_database_at_scrape_time(client: Client) -> None:
    ingest_payload(
        source(),
        rss([("a", "", "No title."), ("b", "Organ recital", "Bach.")]),
        started_at=timezone.now(),
    )

    scraped = scrape_sync(client)

    assert scraped.value("ingestion_quarantine_open_items", kind="feed") == 1
    assert scraped.value("ingestion_sources_by_breaker_state", kind="feed", state="closed") == 1


@pytest.mark.django_db(transaction=True)
def test_a_warming_task_counts_as_completed_or_failed(client: Client) -> None:
    """The warming task's own function (the Celery task is a thin wrapper around it), run
    here so this process's /metrics shows what a worker's would."""
    index_listings()
    key = cache_key(parse_query("jazz", None), generations.active_generation().pk)  # type: ignore[union-attr]
    before = scrape_sync(client)
    async_to_sync(schedule_warming)(key, parse_query("jazz", None))
    get_redis().delete("warming")  # the task message: this test runs its function itself
    assert warming_run.warm(key) == "completed"
    assert warming_run.warm("searchsite:results:no-such-job") == "expired"  # no job left to run
    after = scrape_sync(client)
    assert after.since(before, "retrieval_cache_warming_total", event="completed") == 1
    assert after.since(before, "retrieval_cache_warming_total", event="failed") == 1
