import asyncio
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection
from django.test import AsyncClient
from pytest_django.fixtures import Settings
from redis import Redis

from resilience.redis_clients import get_redis
from searchsite.celery import QUEUES
from searchsite.heartbeat import HEARTBEAT_KEY
from searchsite.supervisor import worker_argv

# The shared real-world corpora: ../shared/data beside the project, or SHARED_DATA_DIR
# (a git worktree, for one, does not sit beside the shared folder).
SHARED_DATA = Path(
    os.environ.get("SHARED_DATA_DIR")
    or Path(__file__).resolve().parents[1].parent / "shared" / "data"
)


def free_port() -> int:
    """A loopback port nobody listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def run_together(works: list[Callable[[], None]]) -> None:
    """Each work in a thread of its own, all released at once; fails on any exception."""
    start = threading.Barrier(len(works))
    errors: list[BaseException] = []

    def run(work: Callable[[], None]) -> None:
        start.wait()
        try:
            work()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(work,)) for work in works]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll for a condition another process brings about; fail after a bounded time."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.05)


def pending_embeddings(database_url: str) -> int:
    """Active listings without an embedding in the active generation, asked on a
    connection of its own."""
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM ingestion_listing l"
            " JOIN ingestion_indexgeneration g ON g.state = 'active'"
            " LEFT JOIN ingestion_listing_embedding e"
            "   ON e.listing_id = l.id AND e.generation_id = g.id"
            " WHERE l.status = 'active' AND e.listing_id IS NULL"
        ).fetchone()
    return int(row[0]) if row else -1


def waiting_on_a_lock(database_url: str, statement_like: str = "%") -> bool:
    """Whether a statement of the test database (LIKE `statement_like`) waits on a lock,
    asked on a connection of its own: a transaction sees pg_stat_activity as it first
    read it."""
    with psycopg.connect(database_url, autocommit=True) as observer:
        row = observer.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND query LIKE %s",
            [statement_like],
        ).fetchone()
    return bool(row and row[0])


async def eventually(condition: Callable[[], Awaitable[bool]], timeout_s: float, what: str) -> None:
    """wait_until for work this test's own event loop does in the background (a task the
    response did not wait for): polls without blocking the loop that must run it."""
    deadline = time.monotonic() + timeout_s
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        await asyncio.sleep(0.02)


@pytest.fixture(scope="session", autouse=True)
def _static_assets_collected() -> None:
    """Pages name their assets by the manifest collectstatic writes into STATIC_ROOT (the
    session's run directory), as `manage.py bootstrap` does on every start."""
    call_command("collectstatic", interactive=False, verbosity=0)


@pytest.fixture(scope="session")
def test_database_url(django_db_setup: None, django_db_blocker: object) -> str:
    """DATABASE_URL of the test database, for processes a test starts (e.g. a worker)."""
    params = connection.get_connection_params()
    host, port = params.get("host", ""), params.get("port", "")
    user, password = params.get("user", ""), params.get("password", "")
    name = settings.DATABASES["default"]["NAME"]
    auth = f"{user}:{password}@" if password else f"{user}@"
    if host.startswith("/"):
        return f"postgresql://{auth}/{name}?host={host}"
    return f"postgresql://{auth}{host}:{port}/{name}"


@pytest.fixture(scope="session")
def child_env(test_database_url: str) -> dict[str, str]:
    env = dict(os.environ)
    env["DATABASE_URL"] = test_database_url
    env["REDIS_URL"] = settings.REDIS_URL
    return env


def start_worker(
    env: dict[str, str],
    *,
    name: str,
    concurrency: int = 1,
    purge: bool = True,
    queues: str = ",".join(QUEUES),
) -> subprocess.Popen[bytes]:
    """A real Celery worker process consuming `queues` (every queue by default) of the
    broker `env` names; returns once it is running."""
    hostname = f"{name}-{os.getpid()}@localhost"
    redis = Redis.from_url(env["REDIS_URL"])
    # Tasks queued by earlier tests (embedding sweeps, polls) must not run in this one; nor
    # may their "a sweep is queued" mark keep this test's sweeps from being queued.
    if purge:
        from ingestion.tasks import EMBED_SCHEDULED_KEY

        redis.delete(*QUEUES, EMBED_SCHEDULED_KEY)
    worker = subprocess.Popen(
        worker_argv(queues, concurrency, hostname, "WARNING"),
        env=env,
        start_new_session=True,
    )
    wait_until(lambda: redis.hexists(HEARTBEAT_KEY, hostname), 60, "the worker's heartbeat")
    return worker


@pytest.fixture
def no_queued_embedding() -> Iterator[None]:
    """Neither an embedding task nor its once-queued mark left by an earlier test: the queue
    then holds exactly what this test caused."""
    from ingestion.tasks import EMBED_SCHEDULED_KEY

    redis = get_redis()
    redis.delete("embedding", EMBED_SCHEDULED_KEY)
    yield
    redis.delete("embedding", EMBED_SCHEDULED_KEY)


def stop_worker(worker: subprocess.Popen[bytes]) -> None:
    worker.send_signal(signal.SIGTERM)  # Celery's warm shutdown stops its pool itself
    try:
        worker.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()


@pytest.fixture
def celery_worker(child_env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    # One per test, stopped before the test's database is flushed: a worker asks for a
    # sweep as it starts, and a sweep still reading the tables deadlocked with the flush's
    # TRUNCATE; the failed flush then left the next test an earlier test's generation.
    worker = start_worker(child_env, name="test-worker")
    yield worker
    stop_worker(worker)


@pytest.fixture(autouse=True)
async def _close_async_connections() -> AsyncIterator[None]:
    """Async tests share one event loop per test; its pooled connections must not outlive
    it (they would keep the test database busy at teardown)."""
    yield
    from asgiref.sync import sync_to_async
    from django.db import connections

    from resilience.awaiting import writes_done
    from retrieval.cache import close_async_redis
    from retrieval.pg.pool import close_pools
    from retrieval.warming.run import tasks_loop

    await writes_done()
    await sync_to_async(tasks_loop.stop, thread_sensitive=False)()  # its own loop's pool
    await close_pools()
    await close_async_redis()
    # Async views reach the ORM (request.auser()) in asgiref's worker thread, whose
    # connection outlives the test otherwise.
    await sync_to_async(connections.close_all)()


@pytest.fixture(autouse=True)
def _kept_lanes_closed() -> Iterator[None]:
    """A test that ran the embedding task in this process leaves its kept lanes'
    connections open, as a worker would; they must not outlive the test."""
    yield
    from ingestion.indexing import close_kept_lanes

    close_kept_lanes()


@pytest.fixture(autouse=True)
def _fresh_search_state() -> None:
    """The vector breaker, cached results and warming marks live in the shared Redis and
    in per-process singletons (those and the embedding lag's last answer); no test may
    inherit another's."""
    from ingestion import embedding_lag
    from retrieval import service
    from retrieval.pg import facets
    from retrieval.warming.schedule import WARMING_QUEUE

    # First: forgetting the wiring hands the last test's pending breaker outcomes to
    # Redis, which must then be cleared with the rest.
    service.forget_wiring()
    service.forget_searchable_generation()
    embedding_lag.latest.forget()  # read afresh, not as of the last test's database
    facets.forget()  # counted afresh too
    redis = get_redis()
    # The warming queue too: no worker takes it in most tests, and past its bound of
    # waiting tasks a test's own timeout would be dropped as queue-full.
    redis.delete(WARMING_QUEUE)
    patterns = (
        "searchsite:breaker:*",
        "searchsite:results:*",
        "searchsite:warm*",
        "searchsite:views-refreshed:*",
    )
    for pattern in (*patterns, "searchsite:search-pressure", "searchsite:vector-pace"):
        keys = list(redis.scan_iter(pattern))
        if keys:
            redis.delete(*keys)


# The vector budget of `patient_search`: no warmed-up search on a busy machine misses it.
PATIENT_VECTOR_BUDGET_MS = 5_000.0
# A caller's timeout within which a search waiting on a lock must give up its vector stage.
SHORT_TIMEOUT_MS = "150"


@pytest.fixture
async def indexed_listings() -> AsyncIterator[None]:
    """The search fixtures' listings, indexed and embedded with the real model, and this
    event loop's search pool open: a search's vector budget runs from the request's
    start, and a process opens its pool once, before its first search (not inside one)."""
    from asgiref.sync import sync_to_async

    from retrieval import service
    from retrieval.pg.pool import get_pool
    from tests.search_fixtures import index_listings

    await sync_to_async(index_listings)()
    await get_pool()
    yield
    service.forget_searchable_generation()


@pytest.fixture
async def warmed_up(async_client: AsyncClient, indexed_listings: None) -> None:
    """One search first: a process's first pays for loading the model and each event
    loop's first for its pool's connections, which can take longer than the vector
    budget, and is not what a test of one search's outcome is about. On a loaded machine
    that first search can miss even the whole deadline (a 503), so it is asked again,
    within a bound, until it answers."""

    await first_search_answered(async_client)


async def first_search_answered(client: AsyncClient) -> None:
    """Search until one answers (bounded): see `warmed_up`."""

    async def answered() -> bool:
        response = await client.get("/api/search", {"q": "warm up"})
        return bool(response.status_code == 200)

    await eventually(answered, 10, "a first search answered")


@pytest.fixture
def listings_locked_before_reading(test_database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The listings table locked after the stages answered and before the listings are
    read. The stages read that table too, so only a lock taken in between stalls the read
    alone: the one seam injected, in both places listings are read (the page's lexical
    preview reads them too, before the search's final read)."""
    from retrieval import search as searching
    from retrieval.pg.hydrate import ListingView, hydrate
    from retrieval.web import page
    from tests.search_fixtures import LEXICAL_TABLE, tables_locked

    async def behind_a_lock(*args: Any, **kwargs: Any) -> list[ListingView]:
        async with tables_locked(test_database_url, LEXICAL_TABLE):
            return await hydrate(*args, **kwargs)

    monkeypatch.setattr(searching, "hydrate", behind_a_lock)
    monkeypatch.setattr(page, "hydrate", behind_a_lock)


@pytest.fixture
def patient_search(settings: Settings) -> None:
    """Budgets no loaded machine misses, for tests about what a search does rather than
    how fast: a vector stage cut short says nothing about its index (test_admin_edits),
    and a statement that waits on a lock only 40 ms can end before an observer that
    connects anew for each look sees it (test_application_names)."""
    settings.SEARCH_DEADLINE_MS = 2 * PATIENT_VECTOR_BUDGET_MS
    settings.SEARCH_CALLER_TIMEOUT_CAP_MS = 2 * PATIENT_VECTOR_BUDGET_MS
    settings.SEARCH_VECTOR_BUDGET_MS = PATIENT_VECTOR_BUDGET_MS
