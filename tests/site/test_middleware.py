"""The stock middleware run on the event loop (searchsite/middleware.py): an anonymous search
sends no hook to Django's sync thread, and the hooks that write still do, so a login made
over ASGI is saved and a staff member's next search shows its stage timings."""

import asyncio
import json
import socket
import time
from collections.abc import Callable
from typing import Any

import pytest
from asgiref import sync
from django.conf import settings
from django.contrib.auth.models import User
from django.test import AsyncClient, override_settings

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def hops(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the functions sent to a thread through asgiref's sync_to_async."""
    sent: list[str] = []
    original = sync.SyncToAsync.__init__

    def recording(
        self: sync.SyncToAsync[..., object], func: Callable[..., object], *args: Any, **kwargs: Any
    ) -> None:
        sent.append(getattr(func, "__qualname__", repr(func)))
        original(self, func, *args, **kwargs)

    monkeypatch.setattr(sync.SyncToAsync, "__init__", recording)
    return sent


async def test_an_anonymous_search_sends_no_middleware_hook_to_a_thread(
    async_client: AsyncClient, indexed_listings: None, hops: list[str]
) -> None:
    await async_client.get("/api/search", {"q": "organ"})  # the handler loads its chain
    hops.clear()
    response = await async_client.get("/api/search", {"q": "jazz"})
    assert response.status_code == 200
    assert hops, "nothing recorded: the probe is broken"  # Django's own signals still hop
    assert [h for h in hops if h.endswith((".process_request", ".process_response"))] == []


async def test_a_login_over_asgi_is_saved_and_staff_see_stage_timings(
    async_client: AsyncClient, indexed_listings: None
) -> None:
    await User.objects.acreate_superuser("editor", "editor@example.org", "a long passphrase")
    login = await async_client.post(
        "/admin/login/", {"username": "editor", "password": "a long passphrase"}
    )
    assert login.status_code == 302, login.content  # the session was saved, in a thread
    body = json.loads((await async_client.get("/api/search", {"q": "jazz"})).content)
    assert {"lexical_ms", "total_ms"} <= body["timings_ms"].keys()
    anonymous = json.loads((await AsyncClient().get("/api/search", {"q": "jazz"})).content)
    assert "timings_ms" not in anonymous


async def test_a_session_that_redis_cannot_serve_in_time_leaves_an_anonymous_search(
    indexed_listings: None,
) -> None:
    """A cache that accepts the connection and never answers: the session cannot be read,
    and after the cache's socket timeout the search goes on without it."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()  # the kernel completes connections; nobody ever reads them
        cache = {
            **settings.CACHES["default"],
            "LOCATION": f"redis://127.0.0.1:{silent.getsockname()[1]}/0",
        }
        with override_settings(CACHES={"default": cache}):
            client = AsyncClient()
            client.cookies[settings.SESSION_COOKIE_NAME] = "a-session-key"
            started = time.monotonic()
            response = await asyncio.wait_for(client.get("/api/search", {"q": "jazz"}), 30)
            waited_s = time.monotonic() - started
    assert response.status_code == 200
    body = json.loads(response.content)
    assert body["results"]
    assert "timings_ms" not in body
    assert waited_s < 4 * settings.CACHE_SOCKET_TIMEOUT_S  # redis-py alone waits 5 s
