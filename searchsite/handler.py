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
"""

from typing import Any

from django.conf import settings
from django.core.handlers.asgi import ASGIHandler
from django.urls import reverse

SEARCH_URL_NAMES = ("search-page", "search-api")


class SearchASGIHandler(ASGIHandler):
    def __init__(self) -> None:
        super().__init__()
        self._search_paths: frozenset[str] | None = None

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
