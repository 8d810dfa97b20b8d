"""The ASGI handler (searchsite/handler.py): an anonymous search starts no thread, while a
search with a session, and every other path, keeps Django's thread per request."""

import threading
from collections.abc import AsyncIterator

import httpx
import pytest
from django.conf import settings
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
