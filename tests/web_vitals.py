"""What a web process holds, read from outside: its search pool's connections and its
event loop's tasks (its /metrics, sampled every retrieval.pg.pool.SAMPLE_S), the statements it
is still cleaning up, and its threads. For fault tests that check a fault left nothing
behind; the app must run one web process (WEB_PROCESSES=1)."""

import time
from dataclasses import dataclass

import httpx
import psutil

from retrieval.pg.pool import SAMPLE_S, SEARCH_CONNECTIONS
from tests.conftest import wait_until
from tests.live_app import LiveApp
from tests.scraping import Scrape


@dataclass(frozen=True)
class Vitals:
    pool_connections: float
    tasks: float
    abandoned: float
    threads: int


def vitals(app: LiveApp) -> Vitals:
    scraped = Scrape(httpx.get(f"{app.url}/metrics", timeout=10).text)
    mine = {"connections": SEARCH_CONNECTIONS}  # not the pool its warm-up uses
    return Vitals(
        scraped.total("retrieval_pool_connections", **mine),
        scraped.total("retrieval_event_loop_tasks", **mine),
        scraped.value("retrieval_statements_abandoned"),
        psutil.Process(app.process.pid).num_threads(),
    )


def at_rest(app: LiveApp) -> Vitals:
    """The vitals once two samples a sampling period apart agree (a search just answered
    may still hold a task or a connection)."""
    seen: list[Vitals] = []

    def settled() -> bool:
        if seen:
            time.sleep(SAMPLE_S + 0.1)
        seen.append(vitals(app))
        return len(seen) > 1 and seen[-1] == seen[-2]

    wait_until(settled, 30, "the web process at rest")
    return seen[-1]
