"""A search's deadline counts from its arrival, and the front door turns searches away at
once past the process's bound (retrieval/bounds/arrival.py, retrieval/bounds/door.py,
searchsite/handler.py): the request paths through the ASGI app, events driving what is in
flight, and injected clocks for the time."""

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from prometheus_client import REGISTRY
from pytest_django.fixtures import Settings

from resilience.redis_clients import get_redis
from retrieval import service
from retrieval.bounds import arrival
from retrieval.bounds.deadline import BudgetPolicy, SearchDeadline, plan_budgets
from retrieval.bounds.door import SHEDDING_HOLD_S, Door
from retrieval.query.parse import parse_query
from retrieval.types import Reason
from searchsite.handler import SearchASGIHandler
from tests.asgi_calls import asgi_get
from tests.conftest import eventually

pytestmark = pytest.mark.django_db(transaction=True)

NOW_WALL = 1_800_000_000.0  # an instant in 2027, seconds since the epoch
NOW = 500.0  # the monotonic clock's reading at NOW_WALL


def stamped(value: bytes, *, trust: bool = True) -> float:
    return arrival.arrived_at(
        [(b"host", b"x"), (arrival.HEADER, value)],
        trust_header=trust,
        clock=lambda: NOW,
        wall_clock=lambda: NOW_WALL,
    )


@pytest.mark.parametrize(
    "value",
    [b"t=1799999999.750", b"1799999999.75", b"t=1799999999750", b"t=1799999999750000"],
    ids=["nginx seconds", "bare seconds", "milliseconds", "microseconds"],
)
def test_a_trusted_proxy_stamp_moves_the_arrival_back_by_the_wait(value: bytes) -> None:
    assert stamped(value) == pytest.approx(NOW - 0.25)


def test_an_untrusted_stamp_is_ignored() -> None:
    assert stamped(b"t=1799999990.0", trust=False) == NOW


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (b"t=1800000005.0", NOW),  # a proxy clock ahead of ours: no wait, no future
        (b"t=1000.0", NOW - arrival.MAX_QUEUED_S),  # a broken clock: the wait is clamped
        (b"t=soon", NOW),
        (b"-5", NOW),
        (b"", NOW),
    ],
)
def test_a_stamp_that_is_no_wait_counts_as_none_or_is_clamped(
    value: bytes, expected: float
) -> None:
    assert stamped(value) == expected


def test_a_deadline_started_at_an_arrival_has_already_spent_the_wait() -> None:
    policy = BudgetPolicy(
        objective_ms=150, caller_cap_ms=1000, reserve_ms=15, vector_budget_ms=40, min_vector_ms=5
    )
    budgets = plan_budgets(policy, caller_timeout_ms=None)
    deadline = SearchDeadline.start(budgets, clock=lambda: NOW, arrived_at=NOW - 0.1)
    assert deadline.end.remaining_ms() == pytest.approx(50)
    assert deadline.stages.remaining_ms() == pytest.approx(35)
    assert deadline.vector is not None
    assert deadline.vector.expired()
    assert deadline.elapsed_ms() == pytest.approx(100)


def test_the_door_sheds_past_its_bound_and_counts_as_shedding_for_a_while() -> None:
    now = [0.0]
    door = Door(2, clock=lambda: now[0])
    first, second = door.try_enter(), door.try_enter()
    assert first is not None
    assert second is not None
    assert not door.shedding()
    assert door.try_enter() is None
    assert door.shedding()
    first.release()
    first.release()  # a slot given back twice frees one place
    assert door.in_flight == 1
    assert door.try_enter() is not None
    now[0] += SHEDDING_HOLD_S
    assert not door.shedding()


# Through the ASGI app: a request held in flight by an event, the next one turned away.


JAZZ = ("/api/search", "q=jazz")


@pytest.fixture
def app() -> SearchASGIHandler:
    return SearchASGIHandler()


async def test_past_the_bound_a_search_is_answered_503_at_once_and_the_held_one_answers(
    app: SearchASGIHandler, settings: Settings, indexed_listings: None
) -> None:
    settings.SEARCH_MAX_IN_FLIGHT = 1
    service.forget_wiring()
    release = asyncio.Event()
    held = asyncio.create_task(asgi_get(app, "/api/search", "q=jazz", release=release))

    async def held_in_flight() -> bool:
        return service.front_door().in_flight == 1

    await eventually(held_in_flight, 5.0, "the held request past the door")

    started = time.perf_counter()
    status, headers, body = await asgi_get(app, "/api/search", "q=jazz")
    took_ms = (time.perf_counter() - started) * 1000
    assert status == 503
    assert headers["retry-after"] == "1"
    assert json.loads(body)["reasons"] == [Reason.OVERLOADED]
    assert took_ms < 50, f"turning a request away took {took_ms:.1f} ms"

    page_status, page_headers, page = await asgi_get(app, "/", "q=jazz")
    assert page_status == 503
    assert page_headers["retry-after"] == "1"
    assert b"Search is busy" in page
    assert "'none'" in page_headers["content-security-policy"]

    release.set()
    status, _, body = await held
    assert status == 200
    assert "Jazz quartet at the riverside" in body.decode()
    assert service.front_door().in_flight == 0  # the answered request gave its place back


async def test_the_door_keeps_out_only_searches(app: SearchASGIHandler, settings: Settings) -> None:
    settings.SEARCH_MAX_IN_FLIGHT = 0
    service.forget_wiring()
    status, _, _ = await asgi_get(app, "/api/schema", "")
    assert status == 200
    status, _, _ = await asgi_get(app, "/api/search", "q=jazz")
    assert status == 503


async def test_a_request_that_queued_past_its_deadline_is_answered_without_a_search(
    app: SearchASGIHandler,
    settings: Settings,
    indexed_listings: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Stamped by a trusted proxy a second ago, with a 150 ms objective: a 503 saying so,
    and no stage is started (the lexical index is never asked)."""
    settings.SEARCH_TRUST_X_REQUEST_START = True
    asked: list[str] = []
    lexical = service.dependencies().lexical
    original = lexical.search

    async def watched(*args: Any, **kwargs: Any) -> Any:
        asked.append("lexical")
        return await original(*args, **kwargs)

    monkeypatch.setattr(lexical, "search", watched)
    stamp = f"t={time.time() - 1.0:.3f}".encode()
    status, headers, body = await asgi_get(app, *JAZZ, headers=((arrival.HEADER, stamp),))
    assert status == 503
    assert headers["retry-after"] == "1"
    assert json.loads(body)["reasons"] == [Reason.QUEUED_PAST_DEADLINE]
    assert asked == []

    fresh = f"t={time.time():.3f}".encode()
    status, _, body = await asgi_get(app, *JAZZ, headers=((arrival.HEADER, fresh),))
    assert status == 200
    assert json.loads(body)["results"]
    assert asked == ["lexical"]


async def test_warming_is_not_scheduled_while_the_door_sheds(settings: Settings) -> None:
    settings.SEARCH_MAX_IN_FLIGHT = 0
    service.forget_wiring()
    query = parse_query("jazz", None, max_chars=200, max_k=50)
    before = _skipped()
    assert service.front_door().try_enter() is None  # one request turned away
    await service.dependencies().warm("searchsite:results:a-key", query)
    assert _skipped() == before + 1
    assert not list(get_redis().scan_iter("searchsite:warm*"))

    settings.SEARCH_MAX_IN_FLIGHT = 4  # a door that has not shed schedules it
    service.forget_wiring()
    await service.dependencies().warm("searchsite:results:a-key", query)
    assert list(get_redis().scan_iter("searchsite:warm*"))


def _skipped() -> float:
    labels = {"event": "skipped"}
    return REGISTRY.get_sample_value("retrieval_cache_warming_total", labels) or 0.0


@pytest.fixture(autouse=True)
async def _nothing_left_in_flight() -> AsyncIterator[None]:
    yield
    service.forget_wiring()
