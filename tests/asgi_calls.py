"""One GET straight through the site's ASGI application, as uvicorn makes it: for tests of
what happens before Django's request machinery (the front door, arrival stamps), which
Django's test clients go around."""

import asyncio
from typing import Any

from searchsite.handler import SearchASGIHandler


async def asgi_get(
    app: SearchASGIHandler,
    path: str,
    query: str,
    *,
    headers: tuple[tuple[bytes, bytes], ...] = (),
    release: asyncio.Event | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One GET through the app; with `release`, the request sits in flight, past the
    door, until the event is set (its body is read only then)."""
    sent: list[dict[str, Any]] = []
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if delivered:  # after the body: the client is still there
            await asyncio.Event().wait()
        if release is not None:
            await release.wait()
        delivered = True
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), *headers],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    await app(scope, receive, send)
    start = sent[0]
    answered = {k.decode().lower(): v.decode() for k, v in start["headers"]}
    return start["status"], answered, b"".join(m.get("body", b"") for m in sent[1:])
