"""Django's stock middleware without a thread hop per hook on async requests.

On an async request Django runs each `MiddlewareMixin` hook in its one sync thread
(`sync_to_async`), because a hook *may* block. These hooks do not, except where noted
below: they read headers and cookies and set headers, cookies and lazy attributes. At 18
hops per search request, the hops were about 4 ms of the HTTP overhead measured here
(docs/benchmarks.md). These subclasses call `process_request` and `process_response` on
the event loop, and keep the hop only for the two hooks that can write to the database:
a session that must be saved, and messages that must be stored (which may load the
session). Of the `process_view` hooks, which Django calls itself, the two that run on
every request are coroutines here, inline for requests that carry no body to parse.
"""

from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import middleware as auth
from django.contrib.messages import middleware as messages
from django.contrib.sessions import middleware as sessions
from django.http import HttpRequest, HttpResponseBase
from django.middleware import clickjacking, common, csrf, security
from django_prometheus import middleware as prometheus


class _OnTheLoop:
    """Async requests: the hooks run inline, unless `_writes()` says this one writes."""

    # Any: each stock base declares its own hook signatures, which no one annotation here
    # would match; `response` below is typed instead.
    get_response: Any
    process_response: Any

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        response: HttpResponseBase | None = None
        if hasattr(self, "process_request"):
            response = self.process_request(request)
        response = response or await self.get_response(request)
        if hasattr(self, "process_response"):
            if self._writes(request):
                response = await sync_to_async(self.process_response)(request, response)
            else:
                response = self.process_response(request, response)
        return response

    def _writes(self, request: HttpRequest) -> bool:
        return False


class PrometheusBeforeMiddleware(_OnTheLoop, prometheus.PrometheusBeforeMiddleware):  # type: ignore[misc]  # django-prometheus is untyped
    pass


_SAFE_METHODS = ("GET", "HEAD", "OPTIONS", "TRACE")


class PrometheusAfterMiddleware(_OnTheLoop, prometheus.PrometheusAfterMiddleware):  # type: ignore[misc]  # django-prometheus is untyped
    async def process_view(self, request: HttpRequest, *view: Any) -> None:
        super().process_view(request, *view)  # labels and counters only


class SecurityMiddleware(_OnTheLoop, security.SecurityMiddleware):
    pass


class CommonMiddleware(_OnTheLoop, common.CommonMiddleware):
    pass


class CsrfViewMiddleware(_OnTheLoop, csrf.CsrfViewMiddleware):
    async def process_view(  # type: ignore[override]  # a coroutine: Django awaits it on ASGI
        self, request: HttpRequest, *view: Any
    ) -> HttpResponseBase | None:
        if request.method in _SAFE_METHODS:  # accepted without reading the body
            return super().process_view(request, *view)
        # Checking the token may parse the body: uploads can spill to disk.
        return await sync_to_async(super().process_view)(request, *view)


class AuthenticationMiddleware(_OnTheLoop, auth.AuthenticationMiddleware):
    pass


class XFrameOptionsMiddleware(_OnTheLoop, clickjacking.XFrameOptionsMiddleware):
    pass


class SessionMiddleware(_OnTheLoop, sessions.SessionMiddleware):
    def _writes(self, request: HttpRequest) -> bool:
        session = getattr(request, "session", None)
        return session is not None and (session.modified or settings.SESSION_SAVE_EVERY_REQUEST)


class MessageMiddleware(_OnTheLoop, messages.MessageMiddleware):
    def _writes(self, request: HttpRequest) -> bool:
        storage = getattr(request, "_messages", None)
        return storage is not None and (storage.used or storage.added_new)
