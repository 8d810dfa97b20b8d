"""Django's ASGI handler, without a thread of its own for each search.

Django gives every request a ThreadSensitiveContext: the first synchronous call made for
that request (its own request_started signal and `response.close()` always make one)
starts a thread for the request, and its end starts another to join it. The search views
make no synchronous calls of their own, and those two threads were 0.6 ms of each search
(in-process ASGI, 200 queries, side by side: p50 8.3 against 7.7 ms). On the search paths
those few calls (Django's signals, closing the response, a staff member's session read from
the cache) go to asgiref's one process-wide thread instead. Every other path keeps
Django's thread per request, so a slow synchronous admin view never queues another.
"""

from typing import Any

from django.core.handlers.asgi import ASGIHandler
from django.urls import reverse

SEARCH_URL_NAMES = ("search-page", "search-api")


class SearchASGIHandler(ASGIHandler):
    def __init__(self) -> None:
        super().__init__()
        self._search_paths: frozenset[str] | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] in self._paths():
            await self.handle(scope, receive, send)
        else:
            await super().__call__(scope, receive, send)

    def _paths(self) -> frozenset[str]:
        if self._search_paths is None:  # the URLconf is loaded by the first request
            self._search_paths = frozenset(reverse(name) for name in SEARCH_URL_NAMES)
        return self._search_paths
