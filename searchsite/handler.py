"""Django's ASGI handler, without a thread of its own for each anonymous search.

Django gives every request a ThreadSensitiveContext: the first synchronous call made for
that request (its own request_started signal and `response.close()` always make one)
starts a thread for the request, and its end starts another to join it. The search views
make no synchronous calls of their own, and those two threads were 0.6 ms of each search
(in-process ASGI, 200 queries, side by side: p50 8.3 against 7.7 ms). So a search without
a session sends Django's few quick calls (its signals, closing the response) to asgiref's
one process-wide thread instead.

A request with a session cookie keeps its own thread: reading the session is a call to
the cache that a stalled Redis can hold up, and on the shared thread it would hold up every
search of the process. So does every other path, so that a slow synchronous admin view
never queues another request.

Every request's body is capped (DATA_UPLOAD_MAX_MEMORY_SIZE) as it is read: Django's own
ASGI handler reads any body whole, into a file that rolls over to disk, before a view or a
middleware could refuse it. A body over the cap is answered 413, in plain words, whether
its length was declared or it came chunked.
"""

from typing import IO, Any

from django.conf import settings
from django.core.handlers.asgi import ASGIHandler
from django.urls import reverse

SEARCH_URL_NAMES = ("search-page", "search-api")


class _BodyTooLargeError(Exception):
    pass


class SearchASGIHandler(ASGIHandler):
    def __init__(self) -> None:
        super().__init__()
        self._search_paths: frozenset[str] | None = None

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
        if self._anonymous_search(scope):
            await self.handle(scope, receive, send)
        else:
            await super().__call__(scope, receive, send)

    def _anonymous_search(self, scope: dict[str, Any]) -> bool:
        if scope["type"] != "http" or scope["path"] not in self._paths():
            return False
        session = settings.SESSION_COOKIE_NAME.encode() + b"="
        return not any(
            name == b"cookie" and session in value for name, value in scope.get("headers", ())
        )

    def _paths(self) -> frozenset[str]:
        if self._search_paths is None:  # the URLconf is loaded by the first request
            self._search_paths = frozenset(reverse(name) for name in SEARCH_URL_NAMES)
        return self._search_paths


async def _too_large(send: Any) -> None:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    body = f"The request body is over {limit} bytes, the most this site accepts.\n".encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
