"""The ASGI handler (searchsite/handler.py): an anonymous search starts no thread and hops
to none, while a search with a session, and every other path, keeps Django's thread per
request."""

import threading
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from asgiref.sync import SyncToAsync
from django.conf import settings
from django.core import signals
from django.core.cache import close_caches
from django.core.handlers.base import reset_urlconf
from django.db import close_old_connections, reset_queries
from pytest_django.fixtures import Settings

from searchsite.handler import SearchASGIHandler

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=SearchASGIHandler())  # type: ignore[arg-type]  # scope: a dict to django-stubs, a MutableMapping to httpx
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        yield client


@pytest.fixture
def thread_starts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    started: list[str] = []
    original = threading.Thread.start

    def recording(self: threading.Thread) -> None:
        started.append(self.name)
        original(self)

    monkeypatch.setattr(threading.Thread, "start", recording)
    return started


# A vector stage that misses its budget schedules warming, which publishes on a thread:
# the budgets are ones a loaded machine does not miss (CI's once did: asyncio_0).
@pytest.mark.usefixtures("patient_search")
@pytest.mark.parametrize("path", ["/api/search", "/"])
async def test_a_search_starts_no_thread(
    path: str, client: httpx.AsyncClient, indexed_listings: None, thread_starts: list[str]
) -> None:
    await client.get(path, params={"q": "organ"})  # the process's own threads start once
    thread_starts.clear()
    response = await client.get(path, params={"q": "jazz"})
    assert response.status_code == 200
    assert "Jazz quartet at the riverside" in response.text  # a result, not the echoed query
    assert thread_starts == []


@pytest.mark.usefixtures("patient_search")
@pytest.mark.parametrize("path", ["/api/search", "/"])
async def test_a_search_hands_nothing_to_a_thread_and_still_sends_the_signals(
    path: str,
    client: httpx.AsyncClient,
    indexed_listings: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every call sent to asgiref's process-wide thread waits there for the GIL: under load
    the two of each search made a queue (docs/reliability.md)."""
    hops: list[str] = []
    original = SyncToAsync.__call__

    async def recording(self: SyncToAsync[Any, Any], *args: Any, **kwargs: Any) -> Any:
        hops.append(getattr(self.func, "__qualname__", repr(self.func)))
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(SyncToAsync, "__call__", recording)
    sent: list[str] = []

    def started(**_: object) -> None:
        sent.append("started")

    def finished(**_: object) -> None:
        sent.append("finished")

    signals.request_started.connect(started)
    signals.request_finished.connect(finished)
    try:
        response = await client.get(path, params={"q": "jazz"})
    finally:
        signals.request_started.disconnect(started)
        signals.request_finished.disconnect(finished)
    assert response.status_code == 200
    assert "Jazz quartet at the riverside" in response.text
    assert hops == []
    assert sent == ["started", "finished"]


def test_the_request_signals_have_only_the_receivers_known_to_be_quick_on_the_loop() -> None:
    """A search sends these signals on the event loop: a receiver added to them (by an app
    or a library) must be one that cannot block, so adding one is a decision, made here."""

    def receivers(signal: Any) -> set[object]:
        return {reference() for _, reference, *_ in signal.receivers}

    assert receivers(signals.request_started) == {reset_queries, close_old_connections}
    assert receivers(signals.request_finished) == {
        close_old_connections,
        close_caches,
        reset_urlconf,
    }


@pytest.mark.usefixtures("patient_search")
async def test_a_search_with_a_session_keeps_a_thread_of_its_own(
    client: httpx.AsyncClient, indexed_listings: None, thread_starts: list[str]
) -> None:
    client.cookies.set(settings.SESSION_COOKIE_NAME, "a-session-key")
    for _ in range(2):  # not only the first: each request gets its own
        thread_starts.clear()
        response = await client.get("/api/search", params={"q": "jazz"})
        assert response.status_code == 200
        assert thread_starts, "a session was read on the process-wide thread"


async def test_other_paths_keep_a_thread_per_request(
    client: httpx.AsyncClient, thread_starts: list[str]
) -> None:
    for _ in range(2):  # not only the first: each request gets its own
        thread_starts.clear()
        response = await client.get("/admin/login/")
        assert response.status_code == 200
        assert thread_starts, "a synchronous view ran without a thread of its request"


@pytest.mark.parametrize("declared", [True, False])
async def test_a_body_over_the_cap_is_a_413_in_plain_words(
    client: httpx.AsyncClient, settings: Settings, declared: bool
) -> None:
    """Refused as it is read, declared or chunked (httpx sends a generator's chunks with no
    Content-Length), before any view; a body under the cap still reaches its view."""
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(20):
            yield b"x" * 100

    content: bytes | AsyncIterator[bytes] = b"x" * 2000 if declared else chunks()
    response = await client.post("/api/editorial/records", content=content)
    assert response.status_code == 413
    assert "over 1000 bytes" in response.text

    small = await client.post("/api/editorial/records", content=b"[]")
    assert small.status_code == 401  # the view answered: no token
