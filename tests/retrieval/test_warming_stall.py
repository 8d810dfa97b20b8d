"""Cache warming during a vector stall: it neither piles up behind the stall nor holds up
embedding, and it respects the vector breaker."""

import asyncio
import functools
import json
import os
import subprocess
import time
from collections.abc import Iterator

import psycopg
import pytest
from asgiref.sync import sync_to_async
from django.db import transaction
from django.test import AsyncClient
from django.utils import timezone

from ingestion import tasks as ingestion_tasks
from ingestion.models import Listing
from ingestion.upsert import apply_draft
from resilience.awaiting import writes_done
from resilience.redis_clients import get_redis
from resilience.token_bucket import TokenBucket
from retrieval import service
from retrieval.bounds.deadline import Deadline
from retrieval.cache import cache_key
from retrieval.pg.pool import WARMING_CONNECTIONS
from retrieval.query.parse import parse_query
from retrieval.warming import run as warming_run
from retrieval.warming.schedule import (
    MAX_QUEUED,
    RESERVATIONS,
    WARMING_QUEUE,
    schedule_warming,
    schedule_warming_unless,
)
from searchsite.celery import QUEUES
from searchsite.heartbeat import HEARTBEAT_KEY
from searchsite.supervisor import WORKERS, worker_argv
from tests.conftest import eventually, first_search_answered, stop_worker, wait_until
from tests.factories import FakeClock, draft, source
from tests.scraping import scrape
from tests.search_fixtures import embeddings_locked

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
WARMING = "retrieval_cache_warming_total"
# More distinct queries than the warming queue holds.
DISTINCT_QUERIES = MAX_QUEUED + 10
CONCURRENT = 5


def _marks() -> int:
    """Warming marks in Redis: a key's job queued or being warmed."""
    return len(list(get_redis().scan_iter("searchsite:warming:*")))


async def _warming_backends(url: str, *, active_only: bool = False) -> set[int]:
    """The pids of the warming connections to Postgres (running a statement only)."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as observer:
        cursor = await observer.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s"
            " AND (NOT %s OR state = 'active')",
            [WARMING_CONNECTIONS, active_only],
        )
        return {row[0] for row in await cursor.fetchall()}


async def _warming_idle(url: str) -> bool:
    """No warming task waits in the queue, and no warming search runs in Postgres."""
    if get_redis().llen(WARMING_QUEUE):
        return False
    return not await _warming_backends(url, active_only=True)


async def _job_for(query_text: str) -> str:
    """A warming job for `query_text` as a timeout schedules it, run here, not queued."""
    generation = await service.searchable_generation_id(Deadline.after(5000))
    assert generation is not None
    key = cache_key(parse_query(query_text, None), generation)
    await schedule_warming(key, parse_query(query_text, None))
    get_redis().delete(WARMING_QUEUE)  # the task message: the test runs its function itself
    return key


async def test_a_warming_job_behind_a_lock_gives_up_at_once_and_can_come_back(
    async_client: AsyncClient, indexed_listings: None, test_database_url: str
) -> None:
    key = await _job_for("jazz night")
    before = await scrape(async_client)
    async with embeddings_locked(test_database_url):
        started = time.monotonic()
        event = await sync_to_async(warming_run.warm, thread_sensitive=False)(key)
        elapsed_s = time.monotonic() - started
    assert event == "dropped_stalled"
    # Well under the 5 s warming budget the search would have waited on the lock.
    assert elapsed_s < 1.5
    assert (await scrape(async_client)).since(before, WARMING, event="dropped_stalled") == 1
    assert _marks() == 0  # the next timeout on this query may schedule it again


async def test_a_warming_job_with_the_breaker_open_runs_no_search(
    async_client: AsyncClient, indexed_listings: None
) -> None:
    key = await _job_for("jazz night")
    breaker = service.vector_breaker()
    await sync_to_async(breaker.record_outcomes)(20, 20)
    assert await sync_to_async(breaker.state)() == "open"
    before = await scrape(async_client)
    event = await sync_to_async(warming_run.warm, thread_sensitive=False)(key)
    assert event == "dropped_breaker_open"
    assert not get_redis().exists(key)  # nothing searched, nothing cached
    assert (await scrape(async_client)).since(before, WARMING, event="dropped_breaker_open") == 1
    assert _marks() == 0
    # Dropping a job does not touch the breaker either: still open, not half-open.
    assert await sync_to_async(breaker.state)() == "open"


async def test_warming_tasks_share_their_process_connections(
    indexed_listings: None, test_database_url: str
) -> None:
    """A task that opened connections of its own forked a cold backend for each search it
    warmed, five times the Postgres CPU of the search itself."""
    for number, text in enumerate(["jazz night", "organ recital", "garden tour"]):
        key = await _job_for(text)
        assert await sync_to_async(warming_run.warm, thread_sensitive=False)(key) == "completed"
        backends = await _warming_backends(test_database_url)
        if number == 0:
            first = backends
            assert first, "the first task's connections were closed with it"
        else:
            assert backends <= first, "a later task opened connections of its own"


async def test_the_warming_queue_holds_at_most_max_queued_tasks(async_client: AsyncClient) -> None:
    get_redis().delete(WARMING_QUEUE)
    before = await scrape(async_client)
    for number in range(DISTINCT_QUERIES):
        await schedule_warming(f"searchsite:results:test:{number}", parse_query(f"q{number}", None))
    assert get_redis().llen(WARMING_QUEUE) == MAX_QUEUED
    after = await scrape(async_client)
    assert after.since(before, WARMING, event="enqueued") == MAX_QUEUED
    assert after.since(before, WARMING, event="dropped_queue_full") == DISTINCT_QUERIES - MAX_QUEUED
    get_redis().delete(WARMING_QUEUE)


async def test_schedulers_racing_each_other_queue_no_more_than_max_queued(
    async_client: AsyncClient,
) -> None:
    """Every scheduler checks for room before any of them has published: only a check
    and reservation made in one step keeps them from all seeing the same room."""
    get_redis().delete(WARMING_QUEUE)
    before = await scrape(async_client)
    await asyncio.gather(
        *(
            schedule_warming(f"searchsite:results:test:race:{n}", parse_query(f"q{n}", None))
            for n in range(DISTINCT_QUERIES)
        )
    )
    assert get_redis().llen(WARMING_QUEUE) == MAX_QUEUED
    after = await scrape(async_client)
    assert after.since(before, WARMING, event="enqueued") == MAX_QUEUED
    assert after.since(before, WARMING, event="dropped_queue_full") == DISTINCT_QUERIES - MAX_QUEUED
    assert get_redis().zcard(RESERVATIONS) == 0  # every place given back once published
    get_redis().delete(WARMING_QUEUE)


async def test_a_place_reserved_by_a_publisher_that_died_is_freed_after_a_while() -> None:
    get_redis().delete(WARMING_QUEUE, RESERVATIONS)
    seconds, micros = get_redis().time()
    now_ms = seconds * 1000 + micros // 1000
    # Publishers that reserved every place a moment ago and are still publishing: no room.
    get_redis().zadd(RESERVATIONS, {f"live-{n}": now_ms for n in range(MAX_QUEUED)})
    await schedule_warming("searchsite:results:test:live", parse_query("organ", None))
    assert get_redis().llen(WARMING_QUEUE) == 0
    # The same places reserved long ago by publishers that never gave them back: room.
    get_redis().delete(RESERVATIONS)
    get_redis().zadd(RESERVATIONS, {f"dead-{n}": now_ms - 60_000 for n in range(MAX_QUEUED)})
    await schedule_warming("searchsite:results:test:dead", parse_query("organ", None))
    assert get_redis().llen(WARMING_QUEUE) == 1
    get_redis().delete(WARMING_QUEUE, RESERVATIONS)


async def test_a_caller_that_sheds_load_schedules_no_warming(async_client: AsyncClient) -> None:
    get_redis().delete(WARMING_QUEUE)
    shedding = True
    schedule = schedule_warming_unless(lambda: shedding, TokenBucket(rate=100, burst=100))
    before = await scrape(async_client)
    await schedule("searchsite:results:test:shed", parse_query("organ", None))
    assert get_redis().llen(WARMING_QUEUE) == 0
    assert _marks() == 0
    assert (await scrape(async_client)).since(before, WARMING, event="skipped") == 1
    shedding = False  # no longer shedding: scheduled as ever
    await schedule("searchsite:results:test:shed", parse_query("organ", None))
    assert get_redis().llen(WARMING_QUEUE) == 1
    get_redis().delete(WARMING_QUEUE)


async def test_a_process_schedules_no_more_warming_than_its_rate(
    async_client: AsyncClient,
) -> None:
    get_redis().delete(WARMING_QUEUE)
    clock = FakeClock()
    schedule = schedule_warming_unless(lambda: False, TokenBucket(2, burst=2, clock=clock))
    before = await scrape(async_client)
    for number in range(5):  # five distinct timeouts at one instant
        await schedule(f"searchsite:results:test:rate{number}", parse_query(f"q{number}", None))
    assert get_redis().llen(WARMING_QUEUE) == 2
    clock.advance(1.0)  # a second later, two more
    for number in range(5, 10):
        await schedule(f"searchsite:results:test:rate{number}", parse_query(f"q{number}", None))
    assert get_redis().llen(WARMING_QUEUE) == 4
    after = await scrape(async_client)
    assert after.since(before, WARMING, event="enqueued") == 4
    assert after.since(before, WARMING, event="over_rate") == 6
    get_redis().delete(WARMING_QUEUE)


def test_the_embedding_worker_never_serves_warming() -> None:
    """A warming search waits on Postgres for up to its budget; the worker that embeds new
    listings must never be the one waiting."""
    queues = {worker.name: set(worker.queues.split(",")) for worker in WORKERS}
    assert "warming" not in queues["embed-worker"]
    assert any("warming" in served for served in queues.values())
    assert set().union(*queues.values()) == set(QUEUES)


def _up(hostname: str) -> bool:
    return bool(get_redis().hexists(HEARTBEAT_KEY, hostname))


@pytest.fixture
def deployment_workers(child_env: dict[str, str]) -> Iterator[None]:
    """The embedding and warming workers as `make run` lays them out (supervisor.WORKERS)."""
    get_redis().delete(*QUEUES, ingestion_tasks.EMBED_SCHEDULED_KEY)
    started = []
    try:
        for worker in WORKERS:
            if worker.name == "ingest-worker":
                continue  # fetching has no part in this
            hostname = f"{worker.name}-{os.getpid()}@localhost"
            argv = worker_argv(worker.queues, worker.concurrency, hostname, "WARNING")
            started.append(subprocess.Popen(argv, env=child_env, start_new_session=True))
            wait_until(functools.partial(_up, hostname), 60, f"{worker.name} running")
        yield
    finally:
        for process in started:
            stop_worker(process)


def _ingest_one() -> int:
    with transaction.atomic():
        feed = source("Arrived during the stall")
        apply_draft(feed, draft("new-1", title="Harp recital", starts_at=None), timezone.now())
    ingestion_tasks.schedule_embedding()
    return Listing.objects.get(title="Harp recital").pk


def _embedded(listing_id: int) -> bool:
    from ingestion.models import ListingEmbedding

    return ListingEmbedding.objects.filter(listing_id=listing_id).exists()


async def test_during_a_vector_stall_warming_drains_and_embedding_keeps_up(
    async_client: AsyncClient,
    indexed_listings: None,
    deployment_workers: None,
    test_database_url: str,
) -> None:
    await first_search_answered(async_client)
    await writes_done()  # its own warming, if it asked for any, decided before this
    before = await scrape(async_client)
    async with embeddings_locked(test_database_url):
        reasons: list[set[str]] = []
        # A few at a time: thirty at once on this test's one event loop missed even the
        # lexical stage's deadline. On a loaded machine some still do (a 503 with its
        # reasons): a timed-out vector stage asks for warming either way.
        for first in range(0, DISTINCT_QUERIES, CONCURRENT):
            numbers = range(first, min(first + CONCURRENT, DISTINCT_QUERIES))
            responses = await asyncio.gather(
                *(async_client.get("/api/search", {"q": f"jazz evening {n}"}) for n in numbers)
            )
            assert {response.status_code for response in responses} <= {200, 503}
            reasons += [set(json.loads(response.content)["reasons"]) for response in responses]
        timeouts = sum(bool({"vector_timeout", "embed_timeout"} & given) for given in reasons)
        # Until the breaker opens (ten outcomes, half of them failed), then it sheds them.
        assert timeouts >= 5

        async def every_timeout_decided() -> bool:
            now = await scrape(async_client)
            # "failed": Redis did not answer in time (a loaded machine)
            events = ("enqueued", "deduplicated", "dropped_queue_full", "failed", "over_rate")
            return sum(now.since(before, WARMING, event=event) for event in events) == timeouts

        # Each timeout's warming is decided behind its response; then, while the stall
        # lasts, every job the worker takes gives up (the breaker is open, or the tables
        # still locked) instead of waiting out its budget, and the queue drains.
        await eventually(every_timeout_decided, 10, "every warming decision")
        # Twenty jobs waiting out a 5 s budget each would take minutes.
        await eventually(
            lambda: _warming_idle(test_database_url), 15, "warming idle while the stall lasts"
        )
        listing_id = await sync_to_async(_ingest_one)()
        released = time.monotonic()
    await sync_to_async(wait_until)(lambda: _embedded(listing_id), 30, "the new listing embedded")
    lag_s = time.monotonic() - released
    # One listing embeds in well under a second once the lock is gone; a worker busy with
    # warming searches would add their budgets.
    assert lag_s < 3, f"embedded {lag_s:.1f}s after the stall"
