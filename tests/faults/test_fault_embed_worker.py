"""The embedding worker killed in the middle of a sweep (issue 12, item 3): listings
ingested meanwhile are found lexically at once, the vector lag grows and `/healthz` and
the metrics say so, and once a worker starts again every pending embedding is done,
though nothing new was ingested to ask for it (its sweep's message is stranded,
unacknowledged, until Redis' visibility timeout).

The app and the worker use a Valkey of the test's own; the worker is held in its sweep by
a lock on the embeddings table and killed there."""

import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest

from ingestion.models import Source
from ingestion.tokens import create_token
from tests.conftest import (
    pending_embeddings,
    start_worker,
    stop_worker,
    wait_until,
    waiting_on_a_lock,
)
from tests.live_app import LiveApp, serving
from tests.load_driver import (
    QUERIES,
    Load,
    server_errors,
    serves_normally,
    under_load,
    untruthful,
)
from tests.private_services import FAULT_SETTINGS, private_valkey
from tests.search_fixtures import VECTOR_TABLE, index_listings

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

NEW = [f"Harpsichord evening {n}" for n in range(5)]
RATE = 10
SECONDS = 2.0


@dataclass(frozen=True)
class Stack:
    app: LiveApp
    env: dict[str, str]
    token: str


@pytest.fixture
def stack(child_env: dict[str, str], tmp_path: Path) -> Iterator[Stack]:
    index_listings()
    desk = Source.objects.create(name="Editorial desk", kind=Source.Kind.EDITORIAL)
    token = create_token("cms", desk)
    with private_valkey(tmp_path) as valkey:
        # A listing waiting a second counts as lagging, so the test need not wait a minute.
        env = {**child_env, **FAULT_SETTINGS, "REDIS_URL": valkey.url, "VECTOR_LAG_MAX_S": "1"}
        with serving(env) as app:
            yield Stack(app, env, token)


def _lagging(url: str) -> bool:
    return "vector_lag" in httpx.get(f"{url}/healthz", timeout=10).json()["failing"]


def _metric(text: str, name: str) -> float:
    (line,) = [line for line in text.splitlines() if line.startswith(f"{name} ")]
    return float(line.split()[1])


def test_a_killed_embedding_worker_keeps_lexical_fresh_shows_its_lag_and_catches_up(
    stack: Stack, test_database_url: str
) -> None:
    wait_until(lambda: serves_normally(stack.app.url, QUERIES), 60, "hybrid answers")
    worker = start_worker(stack.env, name="embed-fault-worker", queues="embedding")
    # Hold the sweep the new listings ask for at its first read of the embeddings (the
    # settling of earlier candidates, or its claim), then kill the worker there.
    with psycopg.connect(test_database_url) as holder:
        holder.execute(f"LOCK TABLE {VECTOR_TABLE} IN ACCESS EXCLUSIVE MODE")
        response = httpx.post(
            f"{stack.app.url}/api/editorial/records",
            json=[{"id": f"new-{n}", "title": title} for n, title in enumerate(NEW)],
            headers={"Authorization": f"Bearer {stack.token}"},
            timeout=10,
        )
        assert response.status_code == 200, response.content
        # Nothing else runs meanwhile: a statement waiting on a lock is the sweep's.
        wait_until(lambda: waiting_on_a_lock(test_database_url), 60, "the sweep to block")
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
        holder.rollback()
    try:
        load = Load(stack.app.url, NEW, RATE, SECONDS)
        with under_load(load):
            pass
        assert server_errors(load.samples) == []
        assert untruthful(load.samples) == []
        found = [
            {r["title"] for r in (s.body or {}).get("results", [])} & set(NEW) for s in load.samples
        ]
        assert all(found), "a new listing missing from lexical results"

        health = httpx.get(f"{stack.app.url}/healthz", timeout=10)
        assert health.status_code == 503
        assert "vector_lag" in health.json()["failing"], health.json()
        metrics = httpx.get(f"{stack.app.url}/metrics", timeout=10).text
        assert _metric(metrics, "ingestion_embeddings_pending") >= len(NEW)
        assert _metric(metrics, "ingestion_embedding_lag_seconds") > 1

        worker = start_worker(
            stack.env, name="embed-fault-worker-2", queues="embedding", purge=False
        )
        wait_until(
            lambda: pending_embeddings(test_database_url) == 0, 60, "every pending embedding"
        )
        # The web process reads the lag afresh every EMBEDDING_LAG_REFRESH_S (5 s).
        wait_until(lambda: not _lagging(stack.app.url), 30, "/healthz to see the lag gone")
    finally:
        if worker.poll() is None:
            stop_worker(worker)
