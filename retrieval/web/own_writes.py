"""A reader's own changes, found by their own searches at once, whichever server they read.

Searches may read a replica that has not replayed a change yet (retrieval/pg/replicas.py).
An editor who saves a listing and searches for it must find it all the same. So every
request that changed something (a method that writes, answered below 400: the admin's
saves, the editorial API, an upload) leaves the primary's WAL position after it in a
signed cookie, and a search carrying that cookie reads only a replica that has replayed
that far, or else the primary (`replica_lagging`). Others' searches are not held back.

The position is read after the view has returned, so after its transaction committed.
The cookie is signed, so a reader cannot send everyone's searches to the primary with a
made-up position any more than by the changes they may make; it lasts a few minutes,
longer than any replica within its lag bound takes to replay.
"""

from collections.abc import Awaitable, Callable
from inspect import iscoroutinefunction
from typing import cast

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponseBase
from django.utils.decorators import sync_and_async_middleware

from retrieval.pg.replicas import PRIMARY_POSITION

COOKIE = "searchsite_written"
_SALT = "retrieval.web.own_writes"
MAX_AGE_S = 600
_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})

Handler = Callable[[HttpRequest], HttpResponseBase]
AsyncHandler = Callable[[HttpRequest], Awaitable[HttpResponseBase]]


def written_position(request: HttpRequest) -> int | None:
    """The primary's WAL position after this reader's last change, if they made one
    lately; None otherwise (or for a cookie that is not ours, or too old)."""
    value = request.get_signed_cookie(COOKIE, default=None, salt=_SALT, max_age=MAX_AGE_S)
    return int(value) if value is not None and value.isdigit() else None


def _changed(request: HttpRequest, response: HttpResponseBase) -> bool:
    return request.method in _WRITES and response.status_code < 400


def _stamp(response: HttpResponseBase) -> None:
    """Only when there are replicas to be behind: without them every search reads the
    primary, and the cookie would be a round trip for nothing."""
    if not settings.SEARCH_REPLICA_URLS:
        return
    with connection.cursor() as cursor:
        cursor.execute(PRIMARY_POSITION)
        (position,) = cursor.fetchone()
    response.set_signed_cookie(
        COOKIE,
        str(position),
        salt=_SALT,
        max_age=MAX_AGE_S,
        httponly=True,
        samesite="Lax",
        secure=settings.SESSION_COOKIE_SECURE,
    )


@sync_and_async_middleware
def own_writes(get_response: Handler | AsyncHandler) -> Handler | AsyncHandler:
    """On the event loop under ASGI; the position's round trip in a thread, and only
    after a change."""
    if iscoroutinefunction(get_response):
        asynchronous = cast("AsyncHandler", get_response)

        async def middleware(request: HttpRequest) -> HttpResponseBase:
            response = await asynchronous(request)
            if _changed(request, response):
                await sync_to_async(_stamp)(response)
            return response

        return middleware

    synchronous = cast("Handler", get_response)

    def sync_middleware(request: HttpRequest) -> HttpResponseBase:
        response = synchronous(request)
        if _changed(request, response):
            _stamp(response)
        return response

    return sync_middleware
