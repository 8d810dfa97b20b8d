"""The open-loop generator's contract (bench/openloop.py), against a tiny HTTP server on
127.0.0.1 that the test controls: requests leave on their schedule while earlier ones are
unanswered, and latency runs from the intended instant even when the client itself had to
wait for a connection."""

import asyncio
import itertools
import json
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from evaluation.sweep import NotLoopbackError

# The benches import each other as top-level modules (each is run as a script from bench/);
# appended, so no bench module can shadow a package of the project.
sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))
from openloop import Connections, Record, Run, Schedule, run, summarise

Handler = Callable[[int], Awaitable[None]]  # told each request's number, returns to answer


@asynccontextmanager
async def server(handler: Handler) -> AsyncIterator[tuple[str, list[float]]]:
    """Yields its base URL and each request's arrival instant (time.monotonic)."""
    arrivals: list[float] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await reader.readline():  # one request line, then headers to the blank line
            while (await reader.readline()) not in {b"\r\n", b""}:
                pass
            number = len(arrivals)
            arrivals.append(time.monotonic())
            await handler(number)
            body = json.dumps({"mode": "hybrid", "reasons": []}).encode()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
        writer.close()

    listening = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = listening.sockets[0].getsockname()[1]
    async with listening:
        yield f"http://127.0.0.1:{port}", arrivals


async def test_it_sends_on_schedule_while_no_response_has_come_back() -> None:
    count, rate = 20, 50.0
    everyone_arrived = asyncio.Event()

    async def hold_until_all_arrived(number: int) -> None:
        # A closed-loop client would wait for the first answer and never send the second.
        if number == count - 1:
            everyone_arrived.set()
        await everyone_arrived.wait()

    async with server(hold_until_all_arrived) as (url, arrivals):
        connections = Connections(url, limit=64)
        started = time.monotonic()
        result = await run(
            connections, "/api/search", itertools.repeat("q"), Schedule.fixed(rate, 0.4), 5.0
        )
        await connections.close()
    assert len(result.records) == count
    assert all(record.status == 200 for record in result.records)
    for number, arrived in enumerate(arrivals):
        # Never early, and late only by the loop's own scheduling (generous on a busy box).
        assert number / rate - 0.005 <= arrived - started <= number / rate + 0.1
    assert max(record.send_lag_ms for record in result.records) < 100


async def test_latency_counts_from_the_intended_instant_when_the_client_must_wait() -> None:
    count, rate, service_s = 10, 100.0, 0.05

    async def slow(number: int) -> None:
        await asyncio.sleep(service_s)  # the server's own slowness, the subject here

    async with server(slow) as (url, _):
        connections = Connections(url, limit=1)  # one at a time: the rest wait in the client
        result = await run(
            connections, "/api/search", itertools.repeat("q"), Schedule.fixed(rate, 0.1), 5.0
        )
        await connections.close()
    last = result.records[-1]
    # Answered one after another, the last ends after all ten services, 90 ms after its own
    # intended instant: about 10 x 50 - 90 = 410 ms late. From its actual send, ~50 ms.
    assert last.latency_ms >= count * service_s * 1000 - last.intended_s * 1000 - 20
    assert last.send_lag_ms >= (count - 1) * service_s * 1000 - last.intended_s * 1000 - 20
    figures = summarise(result)
    assert figures.latency_ms["max"] == pytest.approx(last.latency_ms, abs=0.01)
    assert figures.modes == {"hybrid": 1.0}


async def test_a_request_unanswered_by_its_timeout_is_recorded_without_a_response() -> None:
    never = asyncio.Event()

    async def stall(number: int) -> None:
        await never.wait()

    async with server(stall) as (url, _):
        connections = Connections(url, limit=8)
        result = await run(
            connections, "/api/search", itertools.repeat("q"), Schedule.fixed(20, 0.1), 0.2
        )
        await connections.close()
        never.set()
    assert [record.status for record in result.records] == [0, 0]
    assert all(200 <= record.latency_ms < 1000 for record in result.records)
    assert summarise(result).modes == {"failed": 1.0}


def test_it_refuses_a_target_off_this_machine() -> None:
    with pytest.raises(NotLoopbackError):
        Connections("http://192.0.2.1:8000", limit=1)


def test_a_step_counts_what_arrived_in_its_own_seconds_and_excuses_no_failure() -> None:
    records = [
        Record(0.0, 0.0, 0.1, 200, "hybrid"),
        Record(0.2, 0.2, 0.4, 200, "lexical_fallback", ("vector_timeout",)),
        Record(0.4, 0.4, 0.5, 503, None, ("lexical_timeout",)),
        Record(0.6, 0.6, 1.6, 0),  # no response, given up after the step's second
        Record(0.8, 0.8, 1.3, 200, "hybrid"),  # answered after the step's second
    ]
    probes = [
        {"pool_waits_total": 10.0, "server_in_flight_vector": 2.0},
        {"pool_waits_total": 25.0, "server_in_flight_vector": 4.0},
    ]
    figures = summarise(Run(records, duration_s=1.0, probes=probes))
    # A cumulative series' increase over the step; a gauge's mean.
    assert figures.probes == {"pool_waits_total": 15, "server_in_flight_vector": 3}
    assert figures.offered_rate == 5
    assert figures.completed_rate == 2  # the 200s received within the second
    assert figures.answered_rate == 3  # the 503 too, answered within the second
    assert figures.fallback_share == pytest.approx(0.6)  # the fallback, the 503, the failure
    assert figures.modes["unavailable"] == figures.modes["failed"] == pytest.approx(0.2)
    assert (figures.status_503, figures.status_5xx, figures.no_response) == (1, 1, 1)
    assert figures.latency_ms["max"] == pytest.approx(1000)  # the unanswered one's wait
    # Little's law: 5 arrivals a second, each held from its intended instant to its end.
    assert figures.in_flight_littles_law == pytest.approx(5 * (0.1 + 0.2 + 0.1 + 1.0 + 0.5) / 5)
