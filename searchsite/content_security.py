"""The Content-Security-Policy of every response but the admin's: scripts, styles, images
and form targets are the site's own files only, and nothing inline runs (the search page
and the API docs are written to it; the admin's templates are Django's, and were not).
Django 5.2 has no CSP of its own; the policy is one fixed header, so it is set here
rather than by a package.

X-Content-Type-Options (nosniff), Referrer-Policy (same-origin) and X-Frame-Options (DENY)
come from Django's SecurityMiddleware and XFrameOptionsMiddleware on every response."""

from collections.abc import Awaitable, Callable
from inspect import iscoroutinefunction
from typing import cast

from django.http import HttpRequest, HttpResponseBase
from django.utils.decorators import sync_and_async_middleware

POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
ADMIN_PREFIX = "/admin/"

Handler = Callable[[HttpRequest], HttpResponseBase]
AsyncHandler = Callable[[HttpRequest], Awaitable[HttpResponseBase]]


def _with_policy(request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
    if not request.path.startswith(ADMIN_PREFIX):
        response.headers.setdefault("Content-Security-Policy", POLICY)
    return response


@sync_and_async_middleware
def content_security_policy(get_response: Handler | AsyncHandler) -> Handler | AsyncHandler:
    """On the event loop under ASGI (no thread hop), in line for a sync request."""
    if iscoroutinefunction(get_response):
        asynchronous = cast("AsyncHandler", get_response)

        async def middleware(request: HttpRequest) -> HttpResponseBase:
            return _with_policy(request, await asynchronous(request))

        return middleware

    synchronous = cast("Handler", get_response)

    def sync_middleware(request: HttpRequest) -> HttpResponseBase:
        return _with_policy(request, synchronous(request))

    return sync_middleware
