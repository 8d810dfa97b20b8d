"""Valkey (the broker, result cache and breaker state) stopped under load and started
again (issue 12, item 3): no search answers 5xx and every answer's mode and reasons say
truthfully how it was made; the editorial API still takes records; afterwards the worker
takes ingestion, embedding and warming work again by itself, and no listing is lost.

The app and its worker use a Valkey of the test's own, which it stops for real."""

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest
from redis import Redis

from ingestion.models import Source
from ingestion.tokens import create_token
from retrieval.tasks import warm_cache
from searchsite.celery import app as celery_app
from searchsite.heartbeat import HEARTBEAT_KEY
from tests.conftest import start_worker, stop_worker, wait_until
from tests.live_app import LiveApp, serving
from tests.load_driver import (
    QUERIES,
    RATE,
    Load,
    hung,
    normal,
    recovery_s,
    server_errors,
    serves_normally,
    under_load,
    untruthful,
)
from tests.private_services import FAULT_SETTINGS, PrivateValkey, private_valkey
from tests.search_fixtures import index_listings

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

BEFORE_S = 0.5
OUTAGE_S = 2.0  # the 30 s, shortened (bench/faults.py runs the issue's)
AFTER_S = 3.0
RECOVER_S = 2.0


@dataclass(frozen=True)
class Stack:
    app: LiveApp
    valkey: PrivateValkey
    token: str
    database_url: str


@pytest.fixture
def stack(child_env: dict[str, str], test_database_url: str, tmp_path: Path) -> Iterator[Stack]:
    index_listings()
    desk = Source.objects.create(name="Editorial desk", kind=Source.Kind.EDITORIAL)
    token = create_token("cms", desk)
    with private_valkey(tmp_path) as valkey:
        # Heartbeats every second: the test waits for one after the outage.
        env = {
            **child_env,
            **FAULT_SETTINGS,
            "REDIS_URL": valkey.url,
            "WORKER_HEARTBEAT_INTERVAL_S": "1",
        }
        worker = start_worker(env, name="valkey-fault-worker")
        try:
            with serving(env) as app:
                yield Stack(app, valkey, token, test_database_url)
        finally:
            stop_worker(worker)


def _post_record(stack: Stack, external_id: str) -> int:
    response = httpx.post(
        f"{stack.app.url}/api/editorial/records",
        json=[{"id": external_id, "title": f"Harpsichord evening {external_id}"}],
        headers={"Authorization": f"Bearer {stack.token}"},
        timeout=10,
    )
    return response.status_code


def _unembedded(database_url: str, external_ids: list[str]) -> int:
    """Of the listings of `external_ids`, how many are missing or lack an embedding in
    the active generation."""
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT %s - count(e.listing_id) FROM ingestion_sourcerecord r"
            " JOIN ingestion_indexgeneration g ON g.state = 'active'"
            " LEFT JOIN ingestion_listing_embedding e"
            "   ON e.listing_id = r.listing_id AND e.generation_id = g.id"
            " WHERE r.external_id = ANY(%s)",
            [len(external_ids), external_ids],
        ).fetchone()
    return int(row[0]) if row else len(external_ids)


def _drained(redis: Redis, queue: str) -> bool:
    """Nothing left in `queue` nor taken from it and not yet acknowledged (kombu keeps
    those in `unacked`): every message sent to it was done."""
    return redis.llen(queue) == 0 and redis.hlen("unacked") == 0


def test_valkey_stopped_no_5xx_truthful_answers_and_work_resumes(stack: Stack) -> None:
    wait_until(lambda: serves_normally(stack.app.url, QUERIES), 60, "hybrid answers")
    assert _post_record(stack, "before") == 200

    load = Load(stack.app.url, QUERIES, RATE, BEFORE_S + OUTAGE_S + AFTER_S)
    with under_load(load):
        wait_until(lambda: load.started_at > 0, 5, "the load to start")
        time.sleep(max(0.0, load.started_at + BEFORE_S - time.monotonic()))  # the schedule
        stack.valkey.stop()
        stopped_at = time.monotonic()
        posted_during = _post_record(stack, "during")
        time.sleep(max(0.0, stopped_at + OUTAGE_S - time.monotonic()))
        stack.valkey.start()
        back_at, back_at_wall = time.monotonic(), time.time()

    samples = load.samples
    assert hung(samples) == [], "searches without an answer"
    assert server_errors(samples) == [], [(s.status, s.body) for s in server_errors(samples)]
    assert untruthful(samples) == [], [s.body for s in untruthful(samples)]
    recovered_s = recovery_s(samples, back_at)
    assert recovered_s is not None, "not serving normally by the end of the load"
    # Each answer after it that was not normal, so that a failure says what kept it.
    late = [(round(s.intended_at - back_at, 2), s.status, (s.body or {}).get("reasons"))
            for s in samples if s.intended_at >= back_at and not normal(s)]  # fmt: skip
    assert recovered_s <= RECOVER_S, f"served normally {recovered_s:.2f} s after Valkey: {late}"
    assert posted_during == 200, "the editorial API refused records while Valkey was down"

    # The worker consumes again by itself: its heartbeat, a warming task, and the
    # embedding the next record schedules, which covers the one posted during the outage.
    redis = Redis.from_url(stack.valkey.url)
    wait_until(
        lambda: any(float(t) > back_at_wall for t in redis.hvals(HEARTBEAT_KEY)),
        30,
        "a worker heartbeat after the outage",
    )
    with celery_app.connection_for_write(stack.valkey.broker_url) as broker:
        celery_app.send_task(warm_cache.name, ("no-such-key",), connection=broker)
    wait_until(lambda: _drained(redis, "warming"), 30, "the warming task done")
    assert _post_record(stack, "after") == 200
    ids = ["before", "during", "after"]
    wait_until(lambda: _unembedded(stack.database_url, ids) == 0, 60, "every listing embedded")
