"""Django's ASGI handler, without a thread of its own for each anonymous search.

Django gives every request a ThreadSensitiveContext: the first synchronous call made for
that request (its own request_started signal and `response.close()` always make one)
starts a thread for the request, and its end starts another to join it. Those two threads
were 0.6 ms of each search (in-process ASGI, 200 queries, side by side: p50 8.3 against
7.7 ms). Sent instead to asgiref's one process-wide thread, the same two calls became a
queue under load: each waits for the GIL that the event loop holds for up to its switch
interval, so at 45 searches/s the time from a search's body read to its first middleware
was 26.5 ms at the 90th percentile (44.6 at the 99th), eaten out of a 40 ms vector budget
that counts from arrival (docs/reliability.md). A search without a session therefore
makes no synchronous hop at all: `_search_on_the_loop` is Django's `handle` with the two
calls made on the loop. They are quick there: the receivers of request_started and
request_finished (resetting and closing this thread's database connections, closing its
caches, resetting the URLconf) find nothing open on the loop's thread, as a search's SQL
goes through its own async pools (retrieval/pg/pool.py) and it reads no Django cache. The
test pins those receivers.

A request with a session cookie keeps its own thread: reading the session is a call to
the cache that a stalled Redis can hold up, and on the shared thread it would hold up every
search of the process. So does every other path, so that a slow synchronous admin view
never queues another request.

Every search request is stamped with its arrival (retrieval/bounds/arrival.py), the instant its
deadline counts from, and passes the process's front door (retrieval/bounds/door.py): past the
bound on searches in flight it is answered 503 here, before Django's request machinery
runs, in a small fixed body.

Every request's body is capped (DATA_UPLOAD_MAX_MEMORY_SIZE) as it is read: Django's own
ASGI handler reads any body whole, into a file that rolls over to disk, before a view or a
middleware could refuse it. A body over the cap is answered 413, in plain words, whether
its length was declared or it came chunked.
"""

import asyncio
import contextlib
import json
import time
from typing import IO, Any

from django.conf import settings
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.http import HttpResponseBase
from django.urls import reverse, set_script_prefix

from retrieval import metrics
from retrieval.bounds import arrival
from retrieval.bounds.activity import activity
from retrieval.service import front_door
from retrieval.types import Reason
from retrieval.web.api import RETRY_AFTER_S

# The search URLs' names, and the surface each is counted as.
SEARCHES = (("search-page", "page"), ("search-api", "api"))


class _BodyTooLargeError(Exception):
    pass


class SearchASGIHandler(ASGIHandler):
    def __init__(self) -> None:
        super().__init__()
        self._search_paths: dict[str, str] | None = None

    async def handle(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        try:
            await super().handle(scope, receive, send)
        except _BodyTooLargeError:
            # Raised while the body was read, before any part of a response was sent.
            await _too_large(send)

    async def read_body(self, receive: Any) -> IO[bytes]:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        received = 0

        async def counted() -> dict[str, Any]:
            nonlocal received
            message: dict[str, Any] = await receive()
            received += len(message.get("body", b""))
            if limit is not None and received > limit:
                raise _BodyTooLargeError()
            return message

        body: IO[bytes] = await super().read_body(counted)
        return body

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        surface = self._search_surface(scope)
        if surface is None:
            await super().__call__(scope, receive, send)
            return
        headers = scope.get("headers", [])
        scope[arrival.SCOPE_KEY] = arrival.arrived_at(
            headers, trust_header=settings.SEARCH_TRUST_X_REQUEST_START
        )
        slot = front_door().try_enter()
        if slot is None:
            metrics.SHED_AT_DOOR.labels(surface=surface).inc()
            await _turned_away(surface, send)
            return
        metrics.REQUESTS_IN_FLIGHT.inc()
        searches = activity()
        searches.started()
        admitted_at = time.monotonic()
        try:
            if _has_session(headers):
                await super().__call__(scope, receive, send)
            else:
                await self._search_on_the_loop(scope, receive, send)
        finally:
            searches.finished(time.monotonic() - admitted_at)
            metrics.REQUESTS_IN_FLIGHT.dec()
            slot.release()

    async def _search_on_the_loop(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Django 5.2's `ASGIHandler.handle`, its signals sent and its response closed on the
        loop, not through `sync_to_async`; the caller leaving still cancels the view."""
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        except _BodyTooLargeError:
            await _too_large(send)
            return
        set_script_prefix(get_script_prefix(scope))
        signals.request_started.send(sender=self.__class__, scope=scope)
        request, error_response = self.create_request(scope, body_file)
        if request is None:  # then Django made the error response instead
            body_file.close()
            if error_response is not None:
                await self.send_response(error_response, send)
                error_response.close()
            return

        async def respond() -> HttpResponseBase:
            response = await self.run_get_response(request)
            with contextlib.suppress(asyncio.CancelledError):  # the client left mid-send
                await self.send_response(response, send)
            return response

        listening = asyncio.create_task(self.listen_for_disconnect(receive))
        responding = asyncio.create_task(respond())
        await asyncio.wait((listening, responding), return_when=asyncio.FIRST_COMPLETED)
        for task in (listening, responding):  # the listener first, as Django does
            if task.done():
                with contextlib.suppress(RequestAborted):
                    task.result()
            else:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if responding.cancelled():
            signals.request_finished.send(sender=self.__class__)
        else:
            responding.result().close()
        body_file.close()

    def _search_surface(self, scope: dict[str, Any]) -> str | None:
        """ "api" or "page" for a search request, else None."""
        if scope["type"] != "http":
            return None
        if self._search_paths is None:  # the URLconf is loaded by the first request
            self._search_paths = {reverse(name): surface for name, surface in SEARCHES}
        return self._search_paths.get(scope["path"])


def _has_session(headers: list[tuple[bytes, bytes]]) -> bool:
    session = settings.SESSION_COOKIE_NAME.encode() + b"="
    return any(name == b"cookie" and session in value for name, value in headers)


async def _too_large(send: Any) -> None:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    body = f"The request body is over {limit} bytes, the most this site accepts.\n".encode()
    await _respond(send, 413, b"text/plain; charset=utf-8", body, [])


# What a search turned away at the door gets: fixed bytes, so that refusing costs nothing.
# The API's is its usual 503 body (retrieval/web/api_types.py UnavailableBody).
_BUSY_API = json.dumps(
    {"error": "the search is busy; try again shortly", "reasons": [Reason.OVERLOADED]}
).encode()
_BUSY_PAGE = (
    b'<!doctype html><html lang="en"><head><meta charset="utf-8">'
    b'<meta name="viewport" content="width=device-width, initial-scale=1">'
    b"<title>Search is busy</title></head><body><main><h1>Search is busy</h1>"
    b"<p>Too many searches are running right now. Please try again in a moment.</p>"
    b"</main></body></html>"
)
_BUSY = {
    "api": (b"application/json", _BUSY_API),
    "page": (b"text/html; charset=utf-8", _BUSY_PAGE),
}
# The page's own headers (searchsite/content_security.py) are not set on this path, so it
# carries the strictest: it has no script, style or image to allow.
_BUSY_HEADERS = [
    (b"retry-after", str(RETRY_AFTER_S).encode()),
    (b"cache-control", b"no-store"),
    (b"content-security-policy", b"default-src 'none'; frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
]


async def _turned_away(surface: str, send: Any) -> None:
    content_type, body = _BUSY[surface]
    await _respond(send, 503, content_type, body, _BUSY_HEADERS)


async def _respond(
    send: Any, status: int, content_type: bytes, body: bytes, headers: list[tuple[bytes, bytes]]
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
