"""Valkey frozen under load (issue 31, item 4): the server stopped with SIGSTOP, so its
clients' sockets stay open and nothing answers. With the embeddings table locked at the
same time, every search's vector stage times out, so each one reads the result cache,
asks for cache warming and reports to the breaker's shared state, all in the frozen
server. None of it may hold a response: every search is answered by its deadline
(+ 50 ms), none with a 5xx, each truthfully; afterwards the web process holds no more
tasks or threads than before (a warming enqueue or a breaker write waiting on Valkey
would be one)."""

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from tests.conftest import wait_until
from tests.live_app import LiveApp, serving
from tests.load_driver import (
    QUERIES,
    Load,
    between,
    hung,
    server_errors,
    serves_normally,
    under_load,
    untruthful,
)
from tests.private_services import FAULT_SETTINGS, PrivateValkey, private_valkey
from tests.search_fixtures import index_listings
from tests.web_vitals import at_rest, vitals

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

RATE = 10
BEFORE_S, FROZEN_S, AFTER_S = 1.0, 3.0, 3.0
DEADLINE_S = float(FAULT_SETTINGS["SEARCH_DEADLINE_MS"]) / 1000
LATE_BY_S = 0.050
BACK_S = 10.0


@dataclass(frozen=True)
class Stack:
    app: LiveApp
    valkey: PrivateValkey


@pytest.fixture
def stack(child_env: dict[str, str], tmp_path: Path) -> Iterator[Stack]:
    index_listings()
    with private_valkey(tmp_path) as valkey:
        env = {**child_env, **FAULT_SETTINGS, "REDIS_URL": valkey.url, "WEB_PROCESSES": "1"}
        with serving(env) as app:
            yield Stack(app, valkey)


def test_a_frozen_valkey_never_holds_a_search_past_its_deadline(
    stack: Stack, test_database_url: str
) -> None:
    wait_until(lambda: serves_normally(stack.app.url, QUERIES), 60, "hybrid answers")
    with under_load(Load(stack.app.url, QUERIES, RATE, BEFORE_S)):
        pass
    before = at_rest(stack.app)

    load = Load(stack.app.url, QUERIES, RATE, BEFORE_S + FROZEN_S + AFTER_S)
    with under_load(load), psycopg.connect(test_database_url) as holder:
        wait_until(lambda: load.started_at > 0, 5, "the load to start")
        time.sleep(max(0.0, load.started_at + BEFORE_S - time.monotonic()))  # the schedule
        holder.execute("LOCK TABLE ingestion_listing_embedding IN ACCESS EXCLUSIVE MODE")
        with stack.valkey.frozen():
            frozen_at = time.monotonic()
            time.sleep(FROZEN_S)
        thawed_at = time.monotonic()
        holder.rollback()

    samples = load.samples
    assert hung(samples) == []
    assert server_errors(samples) == [], "a search failed with Valkey frozen"
    assert untruthful(samples) == []
    late = [s.latency_s for s in samples if (s.latency_s or 0) > DEADLINE_S + LATE_BY_S]
    assert late == [], f"answered past the deadline + {LATE_BY_S * 1000:.0f} ms: {late}"
    during = between(samples, frozen_at, thawed_at)
    degraded = [s for s in during if (s.body or {}).get("degraded")]
    assert degraded, "no search timed out on the lock while Valkey was frozen"

    seen = []

    def back() -> bool:
        seen.append(now := vitals(stack.app))
        return now.tasks <= before.tasks and now.threads <= before.threads

    try:
        wait_until(back, BACK_S, "the web process as before the freeze")
    except AssertionError:
        raise AssertionError(f"left behind: {seen[-1]} against {before}") from None
