"""Open-loop load against the search API: requests leave on a schedule made in advance,
whatever the server does with the earlier ones (bench/load.py's steps, bench/soak.py).

What a change must keep:
- no send waits for a response: each request takes an idle keep-alive connection or opens
  one, up to `max_connections`; only past that does a request wait, and that wait is the
  client's own queueing, shown as send lag;
- latency runs from the request's *intended* send instant to the last byte of its
  response, so a server that stalls is charged for every request it held up, including
  the ones the client could not send on time (counting from the actual send would hide
  them: coordinated omission);
- every scheduled request ends in the records, answered or not (status 0: no response by
  its timeout, counted from its intended instant, or the connection failed); a run is
  bounded by its schedule's count and ends by its last intended instant plus the timeout;
- loopback only (`evaluation.sweep.loopback_base_url`): this loads no other machine.

The HTTP/1.1 client is a few lines over asyncio streams rather than httpx: it has no pool
of its own whose queue could delay a send unseen, and it costs the machine under test
less CPU per request than a general client would.
"""

import asyncio
import itertools
import json
import math
import random
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import urlencode, urlsplit

import numpy as np

from evaluation.sweep import loopback_base_url

Probe = Callable[[], Awaitable[Mapping[str, float]]]
PROBE_INTERVAL_S: Final = 0.5
# A request for 100 steps' worth of a fast rate: a bound against a mistyped rate.
MAX_REQUESTS: Final = 200_000


@dataclass(frozen=True)
class Schedule:
    """Intended send instants, in seconds after the start, ascending."""

    offsets: tuple[float, ...]
    duration_s: float

    @classmethod
    def fixed(cls, rate: float, duration_s: float) -> "Schedule":
        count = _bounded_count(rate, duration_s)
        return cls(tuple(number / rate for number in range(count)), duration_s)

    @classmethod
    def poisson(cls, rate: float, duration_s: float, seed: int = 1) -> "Schedule":
        """Exponential gaps at mean `rate`: bursts as independent callers make them."""
        _bounded_count(rate, duration_s)
        rng, at = random.Random(seed), 0.0
        offsets: list[float] = []
        while (at := at + rng.expovariate(rate)) < duration_s and len(offsets) < MAX_REQUESTS:
            offsets.append(at)
        return cls(tuple(offsets), duration_s)

    @property
    def rate(self) -> float:
        return len(self.offsets) / self.duration_s


def _bounded_count(rate: float, duration_s: float) -> int:
    if rate <= 0 or duration_s <= 0:
        raise ValueError("a schedule needs a positive rate and duration")
    count = math.floor(rate * duration_s)
    if count > MAX_REQUESTS:
        raise ValueError(f"{count} requests is more than a run may send ({MAX_REQUESTS})")
    return count


@dataclass(frozen=True)
class Record:
    """One scheduled request, instants in seconds after the run's start."""

    intended_s: float
    sent_s: float  # when its bytes were written (after any wait for a connection)
    done_s: float  # its last byte read, or when it was given up
    status: int  # 0: no response
    mode: str | None = None  # of a 200
    reasons: tuple[str, ...] = ()  # of a 200 or a 503

    @property
    def latency_ms(self) -> float:
        return (self.done_s - self.intended_s) * 1000

    @property
    def send_lag_ms(self) -> float:
        return (self.sent_s - self.intended_s) * 1000


class Connections:
    """Keep-alive HTTP/1.1 connections to one loopback server, at most `limit` open; with
    `readers`, each request carries the next of that many readers' cookies (a budget
    canary assigns arms by them: without, every request is one reader, 127.0.0.1)."""

    def __init__(self, base_url: str, limit: int, readers: int = 0) -> None:
        parts = urlsplit(loopback_base_url(base_url))
        if parts.scheme != "http":
            raise ValueError("the load generator speaks plain HTTP to loopback only")
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self._host_header = f"[{self.host}]" if ":" in self.host else self.host
        self._slots = asyncio.Semaphore(limit)
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self._readers = itertools.cycle(range(readers)) if readers else None

    async def get(self, target: str, on_send: Callable[[], None]) -> tuple[int, bytes]:
        """Status and body of GET `target`; `on_send` is called as its bytes are written."""
        async with self._slots:
            if self._idle:
                reader, writer = self._idle.pop()
                try:
                    return await self._exchange(reader, writer, target, on_send)
                except (ConnectionError, asyncio.IncompleteReadError):
                    pass  # the server closed an idle connection: resend on a fresh one
            reader, writer = await asyncio.open_connection(self.host, self.port)
            return await self._exchange(reader, writer, target, on_send)

    async def _exchange(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        target: str,
        on_send: Callable[[], None],
    ) -> tuple[int, bytes]:
        try:
            on_send()
            cookie = "" if self._readers is None else f"Cookie: reader=r{next(self._readers)}\r\n"
            writer.write(
                f"GET {target} HTTP/1.1\r\nHost: {self._host_header}:{self.port}\r\n"
                f"{cookie}\r\n".encode()
            )
            status_line = await reader.readline()
            if not status_line:
                raise ConnectionResetError("closed before the status line")
            status = int(status_line.split()[1])
            headers = {}
            while (line := await reader.readline()) not in {b"\r\n", b"\n", b""}:
                name, _, value = line.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip().lower()
            body = await _body(reader, headers)
        except BaseException:
            writer.close()  # mid-exchange (a timeout, a reset): this connection is spent
            raise
        if headers.get("connection") == "close":
            writer.close()
        else:
            self._idle.append((reader, writer))
        return status, body

    async def close(self) -> None:
        for _, writer in self._idle:
            writer.close()
        self._idle.clear()


async def _body(reader: asyncio.StreamReader, headers: Mapping[str, str]) -> bytes:
    if "content-length" in headers:
        return await reader.readexactly(int(headers["content-length"]))
    if headers.get("transfer-encoding") == "chunked":
        chunks = []
        while size := int((await reader.readline()).split(b";")[0], 16):
            chunks.append(await reader.readexactly(size))
            await reader.readline()
        await reader.readline()  # the blank line after the last chunk
        return b"".join(chunks)
    raise ConnectionError("a response with neither a length nor chunks")


@dataclass
class Run:
    """One schedule's requests, and what the probes saw meanwhile."""

    records: list[Record]
    duration_s: float
    in_flight_samples: list[int] = field(default_factory=list)  # the client's, each probe
    probes: list[dict[str, float]] = field(default_factory=list)


async def run(
    connections: Connections,
    path: str,
    queries: Iterator[str],
    schedule: Schedule,
    timeout_s: float,
    probes: Sequence[Probe] = (),
) -> Run:
    """Send `schedule`'s requests for `path`?q=<next query>, each given up `timeout_s`
    after its intended instant; returns when every one has ended."""
    clock = asyncio.get_running_loop().time  # the clock asyncio's sleeps and timeouts keep
    start = clock()
    records: list[Record] = []
    outstanding: set[asyncio.Task[None]] = set()
    result = Run(records, schedule.duration_s)

    async def one(intended: float, query: str) -> None:
        sent = [math.nan]

        def mark_sent() -> None:
            sent[0] = clock() - start

        status, body = 0, b""
        try:
            async with asyncio.timeout(max(0.0, start + intended + timeout_s - clock())):
                status, body = await connections.get(f"{path}?{urlencode({'q': query})}", mark_sent)
        except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError, IndexError):
            pass  # no response: status 0, at the instant it was given up
        done = clock() - start
        mode, reasons = _outcome(status, body)
        sent_s = done if math.isnan(sent[0]) else sent[0]
        records.append(Record(intended, sent_s, done, status, mode, reasons))

    async def probe_loop() -> None:
        while True:
            result.in_flight_samples.append(len(outstanding))
            if probes:
                seen: dict[str, float] = {}
                for found in await asyncio.gather(
                    *(probe() for probe in probes), return_exceptions=True
                ):
                    if not isinstance(found, BaseException):  # a failed probe: no sample
                        seen.update(found)
                result.probes.append(seen)
            await asyncio.sleep(PROBE_INTERVAL_S)

    prober = asyncio.create_task(probe_loop())
    try:
        for intended in schedule.offsets:
            await asyncio.sleep(max(0.0, start + intended - clock()))
            task = asyncio.create_task(one(intended, next(queries)))
            outstanding.add(task)
            task.add_done_callback(outstanding.discard)
        if outstanding:
            await asyncio.wait(set(outstanding))
    finally:
        prober.cancel()
        for task in outstanding:
            task.cancel()
    records.sort(key=lambda record: record.intended_s)
    return result


def _outcome(status: int, body: bytes) -> tuple[str | None, tuple[str, ...]]:
    if status not in {200, 503}:
        return None, ()
    try:
        answer = json.loads(body)
    except ValueError:
        return None, ()
    return answer.get("mode"), tuple(answer.get("reasons") or ())


@dataclass(frozen=True)
class StepFigures:
    """What one run offered and got. Shares are of every scheduled request."""

    offered_rate: float
    completed_rate: float  # 200s answered within the step's own seconds, per second
    answered_rate: float  # any response within the step's seconds, per second
    latency_ms: dict[str, float]  # p50, p95, p99, max, from the intended instants
    send_lag_ms: dict[str, float]  # p99, max: the client's own queueing
    modes: dict[str, float]  # a 200's mode, "unavailable" (503), "failed" (the rest)
    reasons: dict[str, float]  # share of requests whose answer gave each reason
    status_5xx: int
    status_503: int
    no_response: int
    in_flight_littles_law: float  # offered rate x mean latency
    in_flight_sampled: float  # the client's outstanding requests, mean of the samples
    probes: dict[str, float]  # each probe's figure over the step (see _probed)
    # The slowest answer of each outcome (a 200's mode, a 503's first reason): whether the
    # late ones were searches or refusals says where the time went.
    slowest_ms: dict[str, float]

    @property
    def fallback_share(self) -> float:
        """Requests not answered `hybrid`: fallbacks, 503s and failures alike (a request
        is never excused from the share by failing outright)."""
        return 1.0 - self.modes.get("hybrid", 0.0)


def summarise(step: Run) -> StepFigures:
    records, seconds = step.records, step.duration_s
    total = max(1, len(records))
    latencies = [record.latency_ms for record in records] or [0.0]
    within = [record for record in records if record.status and record.done_s <= seconds]
    kinds = Counter(_kind(record) for record in records)
    reasons = Counter(reason for record in records for reason in set(record.reasons))
    probe_keys = {key for sample in step.probes for key in sample}
    return StepFigures(
        offered_rate=len(records) / seconds,
        completed_rate=sum(1 for record in within if record.status == 200) / seconds,
        answered_rate=len(within) / seconds,
        latency_ms=_percentiles(latencies, {"p50": 50, "p95": 95, "p99": 99, "max": 100}),
        send_lag_ms=_percentiles(
            [record.send_lag_ms for record in records] or [0.0], {"p99": 99, "max": 100}
        ),
        modes={kind: count / total for kind, count in kinds.items()},
        reasons={reason: count / total for reason, count in reasons.items()},
        status_5xx=sum(1 for record in records if record.status >= 500),
        status_503=sum(1 for record in records if record.status == 503),
        no_response=sum(1 for record in records if record.status == 0),
        # L = λW: arrivals per second times each request's time from its intended instant
        # to its end, answered or given up (the client holds it all that while).
        in_flight_littles_law=len(records) / seconds * float(np.mean(latencies)) / 1000,
        in_flight_sampled=float(np.mean(step.in_flight_samples)) if step.in_flight_samples else 0,
        probes={key: _probed(key, step.probes) for key in sorted(probe_keys)},
        slowest_ms=_slowest(records),
    )


def _slowest(records: Sequence[Record]) -> dict[str, float]:
    slowest: dict[str, float] = {}
    for record in records:
        outcome = _kind(record)
        if record.status == 503 and record.reasons:
            outcome = f"503 {record.reasons[0]}"
        slowest[outcome] = round(max(slowest.get(outcome, 0.0), record.latency_ms), 1)
    return slowest


def _probed(key: str, samples: Sequence[Mapping[str, float]]) -> float:
    """A gauge's mean over the step's samples; a cumulative series' (named *_total)
    increase from the first sample to the last."""
    values = [sample[key] for sample in samples if key in sample]
    return values[-1] - values[0] if key.endswith("_total") else float(np.mean(values))


def _kind(record: Record) -> str:
    if record.status == 200 and record.mode:
        return record.mode
    return "unavailable" if record.status == 503 else "failed"


def _percentiles(values: Sequence[float], which: Mapping[str, int]) -> dict[str, float]:
    # Nearest rank (inverted CDF): each figure is a latency some request really had.
    found = np.percentile(values, list(which.values()), method="inverted_cdf")
    return {name: round(float(value), 2) for name, value in zip(which, found, strict=True)}
