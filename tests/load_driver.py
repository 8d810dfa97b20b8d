"""An open-loop load of searches for fault scenarios (the tests' and bench/faults.py's).

Open loop: request n is sent at `start + n / rate` whatever earlier requests did, so a
stalled system meets the load it would meet in production instead of slowing the driver
down with it (a closed loop hides stalls). Each latency counts from the intended send
time, so a driver that fell behind shows up as latency, not as fewer requests. Bounded in
count and in time, each request by a client timeout (a request without an answer by then
is counted as hung); loopback only.
"""

import asyncio
import gc
import json
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

HUNG_AFTER_S = 5.0
# What the fault tests search for, and how often: a few queries the fixtures answer.
QUERIES = ("jazz", "bread", "organ recital", "science fair")
RATE = 20  # searches per second


@dataclass(frozen=True)
class Sample:
    intended_at: float  # time.monotonic() at which the request was due to be sent
    latency_s: float | None  # from intended_at to the answer; None: hung (no answer in time)
    status: int | None
    body: dict[str, Any] | None
    retry_after: str | None

    @property
    def answered_at(self) -> float | None:
        return None if self.latency_s is None else self.intended_at + self.latency_s


@dataclass
class Load:
    """Searches of `queries`, in turn, at `rate` per second for at most `seconds`."""

    base_url: str
    queries: Sequence[str]
    rate: float
    seconds: float
    path: str = "/api/search"
    samples: list[Sample] = field(default_factory=list)
    started_at: float = 0.0

    def __post_init__(self) -> None:
        host = urlsplit(self.base_url).hostname
        if host not in {"127.0.0.1", "localhost", "::1"}:
            raise ValueError(f"fault loads run on loopback only, not {host}")

    async def run(self) -> list[Sample]:
        count = int(self.rate * self.seconds)
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=64)
        async with httpx.AsyncClient(
            base_url=self.base_url, timeout=HUNG_AFTER_S, limits=limits
        ) as client:
            self.started_at = time.monotonic()
            sends = []
            for number in range(count):
                due = self.started_at + number / self.rate
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                query = self.queries[number % len(self.queries)]
                sends.append(asyncio.create_task(self._one(client, query, due)))
            self.samples = list(await asyncio.gather(*sends))
        return self.samples

    async def _one(self, client: httpx.AsyncClient, query: str, due: float) -> Sample:
        try:
            response = await client.get(self.path, params={"q": query})
        except httpx.TimeoutException:
            return Sample(due, None, None, None, None)
        try:
            body = json.loads(response.content)
        except ValueError:
            body = None
        latency = time.monotonic() - due
        return Sample(due, latency, response.status_code, body, response.headers.get("Retry-After"))


@contextmanager
def under_load(load: Load) -> Iterator[Load]:
    """`load` running in a thread of its own meanwhile (so the test can break things in
    its own), waited for on the way out: its samples are all in once the block ends."""
    failure: list[BaseException] = []

    def drive() -> None:
        try:
            asyncio.run(load.run())
        except BaseException as exc:
            failure.append(exc)

    # Latencies count from when a search was due to be sent, so the driver's own pauses
    # count against the server. A full collection of this process's heap (Django, and the
    # model that embedded the listings) held every thread 158 ms in one run, and a search
    # sent that late read as answered past its deadline. Objects alive now are left out of
    # collections meanwhile; the load's own are collected as usual.
    gc.collect()
    gc.freeze()
    thread = threading.Thread(target=drive, name="fault-load")
    thread.start()
    try:
        yield load
    finally:
        thread.join(load.seconds + HUNG_AFTER_S + 30)
        gc.unfreeze()
    assert not thread.is_alive(), "the load did not finish within its bound"
    assert failure == [], failure


def normal(sample: Sample) -> bool:
    """Served as if nothing were wrong: both stages answered in time."""
    return sample.status == 200 and (sample.body or {}).get("mode") == "hybrid"


def serves_normally(base_url: str, queries: Sequence[str]) -> bool:
    """Whether one search of each query is answered normally now (a warm-up's end: a
    process's first searches pay for loading the model and opening its pool)."""
    load = Load(base_url, queries, rate=len(queries) * 10, seconds=0.1)
    asyncio.run(load.run())
    return all(map(normal, load.samples))


def recovery_s(samples: Sequence[Sample], back_at: float) -> float | None:
    """Seconds from `back_at` (a fault's end) to the first search due after which every
    search was answered normally; None if the load ended before that."""
    after = [s for s in samples if s.intended_at >= back_at]
    for number in range(len(after)):
        if all(map(normal, after[number:])):
            return after[number].intended_at - back_at
    return None


def between(samples: Sequence[Sample], start: float, end: float) -> list[Sample]:
    """The samples due to be sent in [start, end) (time.monotonic() values)."""
    return [s for s in samples if start <= s.intended_at < end]


def server_errors(samples: Sequence[Sample]) -> list[Sample]:
    return [s for s in samples if s.status is not None and s.status >= 500]


def hung(samples: Sequence[Sample]) -> list[Sample]:
    return [s for s in samples if s.latency_s is None]


def untruthful(samples: Sequence[Sample]) -> list[Sample]:
    """Answers whose `mode` and `reasons` disagree with what their results show: a hybrid
    answer with a reason a stage was missing, or degraded; a fallback without a reason, a
    lexical fallback with a vector match, a cache fallback without a cache age (the mode
    names which stages answered: retrieval/hybrid.py). A hybrid answer need not hold a
    vector match: listings not yet embedded have none, and both stages may find nothing."""
    return [s for s in samples if s.status == 200 and not _truthful(s.body or {})]


_MISSING_STAGE = {
    "vector_timeout", "vector_error", "embed_timeout", "breaker_open", "shed", "no_budget",
    "no_generation", "lexical_timeout", "lexical_error", "database_error",
}  # fmt: skip


def _truthful(body: dict[str, Any]) -> bool:
    mode, reasons = body.get("mode"), set(body.get("reasons", []))
    matched = set().union(*(set(r["matched"]) for r in body.get("results", [])))
    if mode == "hybrid":
        return not reasons & _MISSING_STAGE and not body["degraded"]
    if not body.get("degraded") or not reasons:
        return False
    if mode == "lexical_fallback":
        return "vector" not in matched
    if mode == "cache_fallback":
        return body.get("cache_age_s") is not None
    return mode == "vector_fallback" and "lexical" not in matched
