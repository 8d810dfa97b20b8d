"""The web processes' search pressure, through the real Redis: each process publishes what
its counts grew by, a reader sums the processes that published lately and leaves out
those that stopped, and a search through the site's ASGI handler is counted, slow or not.
"""

import json
from typing import Any

import pytest
import redis

from resilience import redis_keys, search_pressure
from resilience.redis_clients import get_redis
from retrieval.bounds import activity
from retrieval.bounds.activity import Publisher, SearchActivity
from searchsite.handler import SearchASGIHandler
from tests.asgi_calls import asgi_get
from tests.factories import FakeClock


def test_a_reader_sums_the_processes_that_published_lately_and_leaves_out_the_others() -> None:
    client = get_redis()
    now = 1_000_000.0
    search_pressure.publish(client, "web-a:1", searches=6, slow=0, interval_s=0.1, now=now)
    search_pressure.publish(client, "web-b:2", searches=2, slow=2, interval_s=0.1, now=now - 0.1)
    search_pressure.publish(client, "web-c:3", searches=50, slow=50, interval_s=0.1, now=now - 5)
    pressure = search_pressure.read(client, now=now)
    assert pressure.searches_per_s == pytest.approx(80.0)
    assert pressure.slow_share == pytest.approx(0.25)
    assert not pressure.quiet
    # Later, with nobody publishing: quiet, and the key expires on its own.
    assert search_pressure.read(client, now=now + 1).quiet
    assert 0 < client.pttl(redis_keys.SEARCH_PRESSURE) <= search_pressure.FRESH_S * 4 * 1000


def test_a_publisher_publishes_what_grew_since_its_last_publication_and_nothing_idle() -> None:
    client = get_redis()
    counts = SearchActivity(slow_s=0.05)
    clock = FakeClock(0.0)
    publisher = Publisher(counts, client, "web:7", clock=clock)
    for seconds in (0.01, 0.2, 0.03, 0.06):
        counts.started()
        counts.finished(seconds)
    clock.advance(0.1)
    publisher.publish()
    first = _published(client, "web:7")
    assert (first["n"], first["slow"], first["s"]) == (4, 2, pytest.approx(0.1))
    counts.started()
    counts.finished(0.01)
    clock.advance(0.1)
    publisher.publish()
    second = _published(client, "web:7")
    assert (second["n"], second["slow"]) == (1, 0)
    assert search_pressure.read(client).searches_per_s == pytest.approx(10.0)
    # An interval in which nothing grew writes nothing: the last sample stays as it was.
    clock.advance(0.1)
    publisher.publish()
    assert _published(client, "web:7") == second


def _published(client: redis.Redis, member: str) -> dict[str, Any]:
    raw = client.hget(redis_keys.SEARCH_PRESSURE, member)
    assert isinstance(raw, bytes)
    return dict(json.loads(raw))


@pytest.mark.django_db
async def test_a_search_through_the_handler_is_counted_and_a_slow_one_as_slow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counts = SearchActivity(slow_s=0.0)  # every search slow
    monkeypatch.setattr(activity, "_activity", counts)
    status, _, _ = await asgi_get(SearchASGIHandler(), "/api/search", "q=recital")
    assert status == 200
    assert (counts.admitted, counts.slow) == (1, 1)
