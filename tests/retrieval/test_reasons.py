"""Every reason in the fixed set, produced through the real path: the real view, Postgres
with pgvector, Valkey and the real model, broken the way production breaks. Each test
checks what the caller is told (status, `mode`, `reasons`, results) and what /metrics
counts (the reason, and the answer by its mode or the 503).

Injected only where the real system cannot be made to fail deterministically, and said so
where it is. A schema change is committed, so the pooled search connections see it, and
undone in `finally`; a lock is held by a transaction rolled back on the way out. No test
leaves either to another."""

import asyncio
import dataclasses
import json
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient
from pytest_django.fixtures import Settings

from ingestion.models import IndexGeneration
from retrieval import search as searching
from retrieval import service
from retrieval.bounds import arrival
from retrieval.pg import facets
from retrieval.pg.suggestions import VIEW
from retrieval.protocols import Dependencies
from retrieval.types import Mode, Reason
from searchsite.handler import SearchASGIHandler
from tests.asgi_calls import asgi_get
from tests.conftest import eventually
from tests.retrieval import test_replica_reads
from tests.scraping import Scrape, scrape
from tests.search_fixtures import (
    LEXICAL_TABLE,
    VECTOR_TABLE,
    about_results,
    embeddings_locked,
    held_by,
    search_json,
)

pytestmark = pytest.mark.django_db(transaction=True)

# Budgets a warmed-up stage on a busy machine always keeps, so that only what a test
# breaks can cost an answer (an embedding late by chance would turn vector_error into
# embed_timeout). The reserve is roomy too: after a stage that timed out, the listings
# must still be read in what is left.
VECTOR_BUDGET_MS = 1000
RESERVE_MS = 500
DEADLINE_MS = 2000


@pytest.fixture(autouse=True)
def roomy_budgets(settings: Settings) -> None:
    settings.SEARCH_VECTOR_BUDGET_MS = VECTOR_BUDGET_MS
    settings.SEARCH_RESERVE_MS = RESERVE_MS
    settings.SEARCH_DEADLINE_MS = DEADLINE_MS


@asynccontextmanager
async def committed_meanwhile(url: str, change: str, undo: str) -> AsyncIterator[None]:
    """`change` committed, so every connection sees it at once, and `undo` on the way out."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(change)
        try:
            yield
        finally:
            await conn.execute(undo)


def _table_renamed(url: str, table: str) -> AbstractAsyncContextManager[None]:
    """`table` renamed meanwhile: statements naming it fail, others go on."""
    held = f"{table}_held"
    return committed_meanwhile(
        url, f"ALTER TABLE {table} RENAME TO {held}", f"ALTER TABLE {held} RENAME TO {table}"
    )


def _column_renamed(url: str, table: str, column: str) -> AbstractAsyncContextManager[None]:
    """`column` of `table` renamed meanwhile: statements reading it fail, others go on."""
    held = f"{column}_held"
    return committed_meanwhile(
        url,
        f"ALTER TABLE {table} RENAME COLUMN {column} TO {held}",
        f"ALTER TABLE {table} RENAME COLUMN {held} TO {column}",
    )


async def _answered(client: AsyncClient, mode: Mode, reason: Reason, q: str) -> dict[str, Any]:
    """A search for `q`, which must answer 200 in `mode`, degraded by `reason` alone, with
    results found by the stage that answered, and be counted so; its body."""
    before = await scrape(client)
    body = await search_json(client, q=q)
    after = await scrape(client)

    # What broke a stage may stop the counts on the filters too: they say so apart.
    answer = (body["mode"], about_results(body["reasons"]), body["degraded"])
    assert answer == (mode, [reason], True)
    assert body["results"], body
    answered_by = ["vector"] if mode == Mode.VECTOR_FALLBACK else ["lexical"]
    assert {tuple(r["matched"]) for r in body["results"]} == {tuple(answered_by)}
    _assert_reasons_counted(before, after, body["reasons"])
    completed = "retrieval_completed_total"
    assert after.total_since(before, completed, mode=mode, degraded="true") == 1
    assert after.total_since(before, completed) == 1
    assert after.total_since(before, "retrieval_unavailable_total") == 0
    return body


def _assert_reasons_counted(before: Scrape, after: Scrape, reasons: list[str]) -> None:
    """Each of `reasons` counted once, and no other."""
    name = "retrieval_degradation_reasons_total"
    for reason in reasons:
        assert after.total_since(before, name, reason=reason) == 1, reason
    assert after.total_since(before, name) == len(reasons)


async def test_vector_timeout_the_embeddings_locked(
    async_client: AsyncClient, warmed_up: None, test_database_url: str
) -> None:
    async with embeddings_locked(test_database_url):
        await _answered(async_client, Mode.LEXICAL_FALLBACK, Reason.VECTOR_TIMEOUT, "jazz")


class StalledEmbedder:
    """The model never answers. The real one takes milliseconds and cannot be made to
    stall, so this is injected; only the search's cancellation ends it."""

    def __init__(self) -> None:
        self.cancelled = asyncio.Event()

    async def embed(self, text: str) -> npt.NDArray[np.float32]:
        try:
            await asyncio.Event().wait()  # never set
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        raise AssertionError("unreachable")


async def test_embed_timeout_the_model_stalled(
    async_client: AsyncClient, warmed_up: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedder = StalledEmbedder()
    stalled: Dependencies = dataclasses.replace(service.dependencies(), embedder=embedder)
    monkeypatch.setattr(searching, "dependencies", lambda: stalled)

    await _answered(async_client, Mode.LEXICAL_FALLBACK, Reason.EMBED_TIMEOUT, "jazz")
    assert embedder.cancelled.is_set()


async def test_vector_error_the_embeddings_table_gone(
    async_client: AsyncClient, warmed_up: None, test_database_url: str
) -> None:
    # Only the vector statement names the embeddings table: lexical and the listings'
    # read go on.
    async with _table_renamed(test_database_url, VECTOR_TABLE):
        await _answered(async_client, Mode.LEXICAL_FALLBACK, Reason.VECTOR_ERROR, "jazz")


async def test_breaker_open_the_shared_breaker_opened_by_failures(
    async_client: AsyncClient, warmed_up: None, settings: Settings
) -> None:
    # The breaker every process shares, opened as failing searches open it (in another
    # process too: tests/retrieval/test_search_resilience.py).
    breaker = service.vector_breaker()
    for _ in range(settings.VECTOR_BREAKER_MIN_CALLS):
        breaker.record(failed=True)
    assert breaker.state() == "open"

    await _answered(async_client, Mode.LEXICAL_FALLBACK, Reason.BREAKER_OPEN, "jazz")


async def test_shed_no_vector_search_admitted(
    async_client: AsyncClient, warmed_up: None, settings: Settings
) -> None:
    settings.SEARCH_MAX_VECTOR_IN_FLIGHT = 0  # the kill switch: every vector stage is shed
    service.forget_wiring()

    await _answered(async_client, Mode.LEXICAL_FALLBACK, Reason.SHED, "jazz")


async def test_no_budget_the_vector_budget_below_its_minimum(
    async_client: AsyncClient, warmed_up: None, settings: Settings
) -> None:
    settings.SEARCH_MIN_VECTOR_BUDGET_MS = VECTOR_BUDGET_MS + 1
    before = await scrape(async_client)

    await _answered(async_client, Mode.LEXICAL_FALLBACK, Reason.NO_BUDGET, "jazz")
    after = await scrape(async_client)
    assert after.since(before, "retrieval_vector_eligible_total") == 0


async def test_no_generation_none_active(async_client: AsyncClient, warmed_up: None) -> None:
    await sync_to_async(IndexGeneration.objects.filter(state=IndexGeneration.State.ACTIVE).update)(
        state=IndexGeneration.State.READY
    )
    service.forget_searchable_generation()
    before = await scrape(async_client)

    body = await _answered(async_client, Mode.LEXICAL_FALLBACK, Reason.NO_GENERATION, "jazz")
    after = await scrape(async_client)
    assert body["index_generation"] is None
    assert after.total_since(before, "retrieval_completed_total", generation="None") == 1


async def test_database_error_the_generation_lookup_errs(
    async_client: AsyncClient, warmed_up: None, test_database_url: str
) -> None:
    # A lookup that errs is not "no generation": the database could not say.
    async with _table_renamed(test_database_url, "ingestion_indexgeneration"):
        service.forget_searchable_generation()  # the warm-up's answer is still fresh
        body = await _answered(async_client, Mode.LEXICAL_FALLBACK, Reason.DATABASE_ERROR, "jazz")
    assert body["index_generation"] is None


async def test_lexical_error_a_column_it_reads_gone(
    async_client: AsyncClient, warmed_up: None, test_database_url: str
) -> None:
    # Only the lexical statement reads the whole-text vector; the pooled connections have
    # it prepared since the warm-up, and Postgres re-analyses a prepared statement after
    # DDL on its tables, so it errs all the same (UndefinedColumn). The vector stage and
    # the listings' read go on.
    async with _column_renamed(test_database_url, LEXICAL_TABLE, "search_vector"):
        await _answered(async_client, Mode.VECTOR_FALLBACK, Reason.LEXICAL_ERROR, "jazz")


async def test_lexical_timeout_the_vocabulary_locked(
    async_client: AsyncClient, warmed_up: None, test_database_url: str
) -> None:
    # A misspelt query matches nothing, so its lexical stage asks the vocabulary for a
    # correction and waits there; the vector stage never reads the vocabulary. A
    # materialized view cannot be LOCKed, but renaming one holds ACCESS EXCLUSIVE until
    # the rollback undoes it. (Both tables locked, the 503 also counts lexical_timeout:
    # tests/ops/test_metrics_exported.py.)
    rename = "ALTER MATERIALIZED VIEW retrieval_vocabulary RENAME TO held"
    async with held_by(test_database_url, rename):
        body = await _answered(
            async_client, Mode.VECTOR_FALLBACK, Reason.LEXICAL_TIMEOUT, "sourdoguh"
        )
    assert body["results"][0]["title"] == "Sourdough baking class"


async def test_listings_timeout_the_listings_unreadable_in_time(
    async_client: AsyncClient, warmed_up: None, listings_locked_before_reading: None
) -> None:
    before = await scrape(async_client)
    # Bounded: a read that ignored its deadline would wait for the lock forever.
    response = await asyncio.wait_for(async_client.get("/api/search", {"q": "jazz"}), 10)
    after = await scrape(async_client)

    assert response.status_code == 503, response.content
    assert int(response["Retry-After"]) >= 1
    body = json.loads(response.content)
    assert body["reasons"] == [Reason.LISTINGS_TIMEOUT]  # both stages had answered
    assert "results" not in body
    _assert_reasons_counted(before, after, [Reason.LISTINGS_TIMEOUT])
    assert after.total_since(before, "retrieval_unavailable_total") == 1
    assert after.total_since(before, "retrieval_completed_total") == 0


async def test_the_page_s_503_says_when_to_retry_as_the_api_s_does(
    async_client: AsyncClient, warmed_up: None, listings_locked_before_reading: None
) -> None:
    response = await asyncio.wait_for(async_client.get("/", {"q": "jazz"}), 10)

    assert response.status_code == 503
    assert int(response["Retry-After"]) >= 1
    assert "try again" in response.content.decode()


# The two reasons given before any search starts: through the ASGI application itself, as
# uvicorn calls it, since Django's test clients go around the front door.


async def test_overloaded_more_searches_in_flight_than_the_door_admits(
    async_client: AsyncClient, warmed_up: None, settings: Settings
) -> None:
    settings.SEARCH_MAX_IN_FLIGHT = 1
    service.forget_wiring()
    app, release = SearchASGIHandler(), asyncio.Event()
    before = await scrape(async_client)
    held = asyncio.create_task(asgi_get(app, "/api/search", "q=jazz", release=release))

    async def in_flight() -> bool:
        return service.front_door().in_flight == 1

    await eventually(in_flight, 5.0, "a search held past the door")
    status, headers, body = await asgi_get(app, "/api/search", "q=organ")
    release.set()
    assert (await held)[0] == 200
    after = await scrape(async_client)

    assert (status, json.loads(body)["reasons"]) == (503, [Reason.OVERLOADED])
    assert int(headers["retry-after"]) >= 1
    assert after.total_since(before, "retrieval_shed_at_door_total", surface="api") == 1
    # Turned away before the search began: it was never started, so no search counts it.
    assert after.total_since(before, "retrieval_started_total") == 1  # the held one


async def test_queued_past_deadline_a_trusted_proxy_stamped_it_a_second_ago(
    async_client: AsyncClient, warmed_up: None, settings: Settings
) -> None:
    settings.SEARCH_TRUST_X_REQUEST_START = True
    stamp = f"t={time.time() - 1 - DEADLINE_MS / 1000:.3f}".encode()
    before = await scrape(async_client)
    status, headers, body = await asgi_get(
        SearchASGIHandler(), "/api/search", "q=jazz", headers=((arrival.HEADER, stamp),)
    )
    after = await scrape(async_client)

    assert (status, json.loads(body)["reasons"]) == (503, [Reason.QUEUED_PAST_DEADLINE])
    assert int(headers["retry-after"]) >= 1
    _assert_reasons_counted(before, after, [Reason.QUEUED_PAST_DEADLINE])
    assert after.total_since(before, "retrieval_unavailable_total") == 1
    assert after.total_since(before, "retrieval_stage_seconds_count") == 0  # no stage ran


# Searches a test of `facets_error` may make: see `_without_facets`.
ERROR_ATTEMPTS = 10


async def _without_facets(client: AsyncClient, reason: Reason) -> None:
    """A search whose results are whole (hybrid, not degraded) and whose counts on the
    filters are missing for `reason`, counted so. On a loaded machine a count's error can
    come after the results were ready, and is then told as `facets_timeout` (the results
    never wait for the counts): for `facets_error`, searched again, afresh, a bounded
    number of times."""
    for _ in range(ERROR_ATTEMPTS if reason == Reason.FACETS_ERROR else 1):
        facets.forget()  # counted afresh, not resting after the last failure
        before = await scrape(client)
        body = await search_json(client, q="jazz")
        after = await scrape(client)
        if body["reasons"] != [Reason.FACETS_TIMEOUT]:
            break
    assert (body["mode"], body["reasons"], body["degraded"]) == (Mode.HYBRID, [reason], False)
    assert body["facets"] is None
    assert body["results"], body
    _assert_reasons_counted(before, after, [reason])
    outcome = "timeout" if reason == Reason.FACETS_TIMEOUT else "error"
    assert after.total_since(before, "retrieval_facets_total", outcome=outcome) == 1


async def test_facets_timeout_the_suggestions_view_held(
    async_client: AsyncClient, warmed_up: None, test_database_url: str, settings: Settings
) -> None:
    settings.SEARCH_FACETS_TTL_S = 0  # not the warm-up's counts: counted afresh
    facets.forget()
    # Only the counts read the view (its top venues); a refresh holds it.
    async with held_by(test_database_url, f"REFRESH MATERIALIZED VIEW {VIEW}"):
        await _without_facets(async_client, Reason.FACETS_TIMEOUT)


async def test_facets_error_the_suggestions_view_gone(
    async_client: AsyncClient, warmed_up: None, test_database_url: str, settings: Settings
) -> None:
    settings.SEARCH_FACETS_TTL_S = 0
    facets.forget()
    async with committed_meanwhile(
        test_database_url,
        f"ALTER MATERIALIZED VIEW {VIEW} RENAME TO {VIEW}_held",
        f"ALTER MATERIALIZED VIEW {VIEW}_held RENAME TO {VIEW}",
    ):
        await _without_facets(async_client, Reason.FACETS_ERROR)


def test_every_reason_has_its_test_here() -> None:
    """Here, or for where an answer was read, with the replica they need."""
    names = [*globals(), *vars(test_replica_reads)]
    untested = [r for r in Reason if not any(n.startswith(f"test_{r}_") for n in names)]
    assert untested == []
