"""Postgres stopped under load and started again (issue 12, item 3): searches fail fast
and visibly meanwhile (a 503 with Retry-After within 100 ms, none hung), the system
serves normally again soon after Postgres is back, with its pool whole, and the ingestion
batch queued during the outage is applied exactly once; the worker waiting for Postgres
with that batch outlives a broker restart meanwhile.

The app, its worker and their Postgres and Valkey are the test's own (a copy of the test
database), so stopping Postgres leaves the session's server alone."""

import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from redis import Redis

from ingestion.models import Source
from ingestion.polling import poll_source
from ingestion.tasks import poll_source as poll_source_task
from retrieval.pg.pool import SEARCH_CONNECTIONS
from searchsite.celery import app as celery_app
from tests.conftest import start_worker, stop_worker, wait_until
from tests.feeds import numbered_rss
from tests.live_app import LiveApp, serving
from tests.load_driver import (
    QUERIES,
    RATE,
    Load,
    between,
    hung,
    recovery_s,
    server_errors,
    serves_normally,
    under_load,
)
from tests.private_services import (
    FAULT_SETTINGS,
    PrivatePostgres,
    PrivateValkey,
    private_stack,
)
from tests.search_fixtures import index_listings

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

BEFORE_S = 0.5  # of load before Postgres stops
OUTAGE_S = 1.5  # the 10 s, shortened (bench/faults.py runs the issue's)
RECOVER_S = 3.0  # of load after Postgres is back: long enough to see it serve normally
FAIL_FAST_S = 0.100
NEVER_WAITED_S = 0.5  # half the deadline
ITEMS = 30


@dataclass(frozen=True)
class Stack:
    app: LiveApp
    postgres: PrivatePostgres
    valkey: PrivateValkey
    source_id: int
    feed: Path
    worker: subprocess.Popen[bytes]


def _feed(version: str) -> bytes:
    return numbered_rss(ITEMS, version)


@pytest.fixture
def stack(child_env: dict[str, str], test_database_url: str, tmp_path: Path) -> Iterator[Stack]:
    index_listings()
    feed = tmp_path / "feed.xml"
    feed.write_bytes(_feed("v1"))
    source = Source.objects.create(name="a feed", kind=Source.Kind.FEED, url=str(feed))
    assert poll_source(source.pk).new == ITEMS
    with private_stack(tmp_path, test_database_url, {**child_env, **FAULT_SETTINGS}) as private:
        worker = start_worker(private.env, name="pg-fault-worker", queues="ingestion")
        try:
            with serving(private.env) as app:
                yield Stack(app, private.postgres, private.valkey, source.pk, feed, worker)
        finally:
            stop_worker(worker)


def _polls_ok(url: str, source_id: int) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM ingestion_poll WHERE source_id = %s AND status = 'ok'",
            [source_id],
        ).fetchone()
    return int(row[0]) if row else 0


def _versions(url: str, source_id: int) -> list[tuple[str, int, int]]:
    """The source's listings by description and version: applied once, all in one."""
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT l.description, l.content_version, count(*) FROM ingestion_listing l"
            " JOIN ingestion_sourcerecord r ON r.listing_id = l.id WHERE r.source_id = %s"
            " GROUP BY 1, 2",
            [source_id],
        ).fetchall()


def test_postgres_stopped_fails_fast_recovers_and_applies_each_batch_once(stack: Stack) -> None:
    wait_until(lambda: serves_normally(stack.app.url, QUERIES), 60, "hybrid answers")

    stack.feed.write_bytes(_feed("v2"))
    load = Load(stack.app.url, QUERIES, RATE, BEFORE_S + OUTAGE_S + RECOVER_S + 2)
    with under_load(load):
        wait_until(lambda: load.started_at > 0, 5, "the load to start")
        time.sleep(max(0.0, load.started_at + BEFORE_S - time.monotonic()))  # the schedule
        stack.postgres.stop()
        stopped_at = time.monotonic()
        # A poll queued while Postgres is down: its batch must wait for it, not be lost.
        with celery_app.connection_for_write(stack.valkey.broker_url) as broker:
            celery_app.send_task(poll_source_task.name, (stack.source_id,), connection=broker)
        time.sleep(max(0.0, stopped_at + OUTAGE_S - time.monotonic()))
        starting_at = time.monotonic()
        stack.postgres.start()
        back_at = time.monotonic()

    samples = load.samples
    assert hung(samples) == [], "searches without an answer"
    assert server_errors([s for s in samples if s.status != 503]) == []
    # While the server starts up it is neither down nor serving: those searches must be
    # answered (above) but are held to no latency bound.
    during = between(samples, stopped_at, starting_at)
    refused = [s for s in during if s.status == 503]
    assert refused, "no search saw Postgres down"
    assert all(s.retry_after for s in refused), "a 503 without Retry-After"
    # Failing fast is a few milliseconds against the deadline's 1000 (FAULT_SETTINGS); a
    # machine shared with other work stalls a process for a few hundred now and then, so
    # the test asks most answers to meet the 100 ms, and none to wait long.
    latencies = sorted(s.latency_s or 0 for s in refused)
    assert latencies[int(len(latencies) * 0.9)] <= FAIL_FAST_S, latencies
    assert latencies[-1] <= NEVER_WAITED_S, latencies

    recovered_s = recovery_s(samples, back_at)
    assert recovered_s is not None, "not serving normally by the end of the load"
    assert recovered_s <= RECOVER_S, f"served normally {recovered_s:.2f} s after Postgres was back"

    wait_until(lambda: _polls_ok(stack.postgres.url, stack.source_id) == 2, 30, "the batch")
    with psycopg.connect(stack.postgres.url) as conn:
        connections = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
            [SEARCH_CONNECTIONS],
        ).fetchone()
    versions = _versions(stack.postgres.url, stack.source_id)
    assert versions == [("Details v2", 2, ITEMS)], "the batch was lost or applied twice"
    assert connections is not None
    assert 1 <= connections[0] <= settings.SEARCH_POOL_SIZE, "the search pool not whole again"


def test_a_batch_waiting_for_postgres_outlives_a_broker_restart(stack: Stack) -> None:
    """Postgres stopped with a poll queued, then Valkey stopped and started while the
    worker waits to apply it: the worker reconnects and applies the batch once Postgres
    is back. When the poll waited as a Celery countdown, the worker held that message
    unacknowledged, and losing the broker's connection made it exit ("Unrecoverable
    error"), the batch stranded until the visibility timeout."""
    stack.feed.write_bytes(_feed("v2"))
    stack.postgres.stop()
    broker = Redis.from_url(stack.valkey.url)
    with celery_app.connection_for_write(stack.valkey.broker_url) as connection:
        celery_app.send_task(poll_source_task.name, (stack.source_id,), connection=connection)
    # Taken by the worker, which cannot apply it yet: the queue is empty, the message held.
    wait_until(
        lambda: broker.llen("ingestion") == 0 and broker.hlen("unacked") == 1, 10, "the poll taken"
    )
    stack.valkey.stop()
    stack.valkey.start()
    stack.postgres.start()

    wait_until(
        lambda: (
            stack.worker.poll() is not None or _polls_ok(stack.postgres.url, stack.source_id) == 2
        ),
        60,
        "the batch, or the worker's end",
    )
    assert stack.worker.poll() is None, "the worker exited while the broker was away"
    assert _versions(stack.postgres.url, stack.source_id) == [("Details v2", 2, ITEMS)]
