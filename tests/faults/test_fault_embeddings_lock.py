"""The embeddings table locked under load (issue 12, item 3; one search at a time:
tests/retrieval/test_search_under_lock.py): every search still answers in time from lexical
results, says why, and no vector statement outlives its budget by more than 20 ms in
`pg_stat_activity`, however many are in flight.

The vector breaker is kept closed (a minimum of calls above the load's), or it would
open after ten timeouts and the searches after those would start no statement to abandon.

A search watched past its budget for the what-if (SEARCH_WHATIF_SAMPLE, 1 % by default)
is the one exception by design: its statement runs to the stages' deadline. The tests run
with none watched (tests/services.py).

Two defences end a vector statement at its budget: the search's client-side cancel and
the statement's own `statement_timeout`. The load test holds if either is there; the
frozen client's test below needs the server's, since a process that cannot run (stopped,
swapped out, its event loop stuck) cannot send a cancel."""

import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import psycopg
import pytest

from retrieval.pg.statement import VECTOR_TAG
from tests.conftest import wait_until, waiting_on_a_lock
from tests.live_app import LiveApp, serving
from tests.load_driver import (
    QUERIES,
    RATE,
    Load,
    hung,
    server_errors,
    serves_normally,
    under_load,
    untruthful,
)
from tests.private_services import FAULT_SETTINGS, private_valkey
from tests.search_fixtures import VECTOR_TABLE, index_listings

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

LOCKED_S = 2.0  # the 5 s, shortened (bench/faults.py runs the issue's)
BUDGET_MS = 40  # the default vector budget
GRACE_MS = 20


# Long enough for the test to see the statement wait and stop its client well before the
# budget runs out (FAULT_SETTINGS' 600 ms; the deadline's 1000 ms holds the lexical stage).
FROZEN_BUDGET_MS = int(FAULT_SETTINGS["SEARCH_VECTOR_BUDGET_MS"])


@contextmanager
def _app(child_env: dict[str, str], tmp_path: Path, budget_ms: int) -> Iterator[LiveApp]:
    index_listings()
    with private_valkey(tmp_path) as valkey:
        env = {
            **child_env,
            **FAULT_SETTINGS,  # a deadline the shared machine cannot miss; the budget below
            "REDIS_URL": valkey.url,
            "SEARCH_VECTOR_BUDGET_MS": str(budget_ms),
            "VECTOR_BREAKER_MIN_CALLS": str(int(RATE * LOCKED_S) * 10),
        }
        with serving(env) as app:
            yield app


@pytest.fixture
def app(child_env: dict[str, str], tmp_path: Path) -> Iterator[LiveApp]:
    with _app(child_env, tmp_path, BUDGET_MS) as app:
        yield app


@pytest.fixture
def patient_app(child_env: dict[str, str], tmp_path: Path) -> Iterator[LiveApp]:
    with _app(child_env, tmp_path, FROZEN_BUDGET_MS) as app:
        yield app


def _running(observer: psycopg.Connection, for_longer_than_s: float = 0.0) -> int:
    """Vector statements running, for longer than `for_longer_than_s`."""
    row = observer.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND state = 'active' AND query LIKE %s"
        " AND clock_timestamp() - query_start >= make_interval(secs => %s)",
        [f"/* {VECTOR_TAG} */%", for_longer_than_s],
    ).fetchone()
    return int(row[0]) if row else 0


def _overdue(observer: psycopg.Connection, budget_ms: int = BUDGET_MS) -> int:
    """Vector statements running longer than their budget and the grace."""
    return _running(observer, (budget_ms + GRACE_MS) / 1000)


def test_locked_embeddings_under_load_answer_in_time_and_abandon_nothing(
    app: LiveApp, test_database_url: str
) -> None:
    wait_until(lambda: serves_normally(app.url, QUERIES), 60, "hybrid answers")
    overdue, seen_running = [], 0
    with (
        psycopg.connect(test_database_url, autocommit=True) as observer,
        psycopg.connect(test_database_url) as holder,
    ):
        holder.execute(f"LOCK TABLE {VECTOR_TABLE} IN ACCESS EXCLUSIVE MODE")
        load = Load(app.url, QUERIES, RATE, LOCKED_S)
        with under_load(load):
            wait_until(lambda: load.started_at > 0, 5, "the load to start")
            # Watch Postgres for as long as the load sends (bounded by its schedule).
            while time.monotonic() < load.started_at + LOCKED_S + 0.2:
                overdue.append(_overdue(observer))
                seen_running = max(seen_running, _running(observer))
        holder.rollback()

    samples = load.samples
    assert hung(samples) == []
    assert server_errors(samples) == []
    assert untruthful(samples) == []
    assert all("vector_timeout" in (s.body or {}).get("reasons", []) for s in samples)
    assert seen_running > 0, "no vector statement ever seen waiting on the lock"
    assert max(overdue) == 0, f"vector statements past budget + {GRACE_MS} ms"


def test_a_vector_statement_ends_at_its_budget_while_its_client_is_frozen(
    patient_app: LiveApp, test_database_url: str
) -> None:
    wait_until(lambda: serves_normally(patient_app.url, QUERIES), 60, "hybrid answers")
    web = patient_app.process.pid  # the leader of uvicorn's own session (start_new_session)
    overdue = []
    with (
        psycopg.connect(test_database_url, autocommit=True) as observer,
        psycopg.connect(test_database_url) as holder,
        ThreadPoolExecutor(1) as client,
    ):
        holder.execute(f"LOCK TABLE {VECTOR_TABLE} IN ACCESS EXCLUSIVE MODE")
        asked = client.submit(
            httpx.get, f"{patient_app.url}/api/search", params={"q": QUERIES[0]}, timeout=30
        )
        wait_until(
            lambda: waiting_on_a_lock(test_database_url, f"/* {VECTOR_TAG} */%"),
            10,
            "the search's vector statement to wait on the lock",
        )
        os.killpg(web, signal.SIGSTOP)  # from here on nothing of the web server's runs
        try:
            frozen_at = time.monotonic()
            frozen_with = _running(observer)  # its statement, unless the client cancelled first
            while time.monotonic() < frozen_at + (FROZEN_BUDGET_MS + 500) / 1000:
                overdue.append(_overdue(observer, FROZEN_BUDGET_MS))
            left_running = _running(observer)
        finally:
            os.killpg(web, signal.SIGCONT)
        holder.rollback()
        answer = asked.result()

    assert frozen_with > 0, "the vector statement ended before its client was stopped"
    assert max(overdue) == 0, f"a vector statement ran past its budget + {GRACE_MS} ms"
    assert left_running == 0, "the frozen client's vector statement is still running"
    # Thawed past its deadline, the search says so at once rather than answer late.
    assert answer.status_code == 503, answer.text
    assert answer.headers["Retry-After"]
    assert "vector_timeout" in answer.json()["reasons"], answer.text
