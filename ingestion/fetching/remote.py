"""Fetching a source over HTTP(S): conditional, size-capped, deadline-bound, address-vetted.

Synchronous on purpose: it runs in Celery workers, one fetch per task.
"""

import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from ingestion.fetching.outcomes import FetchError, FetchResult
from ingestion.fetching.transport import FetchDeadline, VettingBackend, VettingTransport

USER_AGENT = "searchsite-fetcher/0.1 (listings ingestion)"
MAX_REDIRECTS = 5
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# Client errors that say "later", not "never".
_TRANSIENT_CLIENT_STATUSES = frozenset({408, 425, 429})


def fetch_url(
    url: str,
    *,
    etag: str = "",
    last_modified: str = "",
    connect_timeout_s: float,
    read_timeout_s: float,
    total_timeout_s: float,
    max_bytes: int,
    allow_private: bool,
) -> FetchResult:
    """GET `url`, following up to MAX_REDIRECTS redirects; raises FetchError on failure."""
    started = time.monotonic()
    deadline = FetchDeadline(total_timeout_s)
    target = _http_url(url)
    headers = {"User-Agent": USER_AGENT}
    if etag:
        headers["If-None-Match"] = etag
    if last_modified:
        headers["If-Modified-Since"] = last_modified
    timeout = httpx.Timeout(
        connect=connect_timeout_s, read=read_timeout_s, write=read_timeout_s, pool=None
    )
    transport = VettingTransport(VettingBackend(allow_private=allow_private, deadline=deadline))
    with (
        httpx.Client(
            transport=transport, headers=headers, timeout=timeout, trust_env=False
        ) as client,
        _as_fetch_errors(deadline, total_timeout_s),
    ):
        for _hop in range(MAX_REDIRECTS + 1):
            with client.stream("GET", target) as response:
                if response.status_code not in _REDIRECT_STATUSES:
                    return _result(response, etag, last_modified, max_bytes, started)
                location = response.headers.get("Location")
                if not location:
                    raise FetchError(
                        f"HTTP {response.status_code} without a Location", permanent=True
                    )
                target = _http_url(location, base=response.url)
    raise FetchError(f"more than {MAX_REDIRECTS} redirects", permanent=True)


def _http_url(url: str, *, base: httpx.URL | None = None) -> httpx.URL:
    try:
        parsed = base.join(url) if base else httpx.URL(url)
        host = parsed.host  # decoding IDNA here, as httpx will, fails on a malformed A-label
    except (httpx.InvalidURL, UnicodeError) as exc:
        raise FetchError(f"invalid URL {url!r}: {exc}", permanent=True) from exc
    if parsed.scheme not in ("http", "https"):
        raise FetchError(f"unsupported URL scheme {parsed.scheme!r}", permanent=True)
    if not host:
        raise FetchError(f"no host in URL {url!r}", permanent=True)
    return parsed


def _result(
    response: httpx.Response, etag: str, last_modified: str, max_bytes: int, started: float
) -> FetchResult:
    status = response.status_code
    if status == 304:
        # A 304 may omit the validators; the ones we sent are still the current ones.
        return FetchResult(
            body=None,
            not_modified=True,
            etag=response.headers.get("ETag", etag),
            last_modified=response.headers.get("Last-Modified", last_modified),
            status=status,
            elapsed_s=time.monotonic() - started,
        )
    if not 200 <= status < 300:
        transient = status >= 500 or status in _TRANSIENT_CLIENT_STATUSES
        raise FetchError(f"HTTP {status} {response.reason_phrase}", permanent=not transient)
    body = _capped_body(response, max_bytes)
    return FetchResult(
        body=body,
        not_modified=False,
        etag=response.headers.get("ETag", ""),
        last_modified=response.headers.get("Last-Modified", ""),
        status=status,
        elapsed_s=time.monotonic() - started,
    )


def _capped_body(response: httpx.Response, max_bytes: int) -> bytes:
    """The body, abandoned (and the connection closed) as soon as it passes `max_bytes`.

    The cap applies to decoded bytes, so a small gzip bomb is stopped too; each network
    chunk is at most 64 KiB, which bounds what one step can inflate to.
    """
    too_big = FetchError(f"payload over {max_bytes} bytes", permanent=True)
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise too_big
    chunks, size = [], 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > max_bytes:
            raise too_big
        chunks.append(chunk)
    return b"".join(chunks)


@contextmanager
def _as_fetch_errors(deadline: FetchDeadline, total_timeout_s: float) -> Iterator[None]:
    try:
        yield
    except httpx.TimeoutException as exc:
        if deadline.expired():
            reason = f"over the total timeout of {total_timeout_s} s"
        else:
            phases = {httpx.ConnectTimeout: "connect", httpx.WriteTimeout: "write"}
            reason = f"{phases.get(type(exc), 'read')} timeout"
        raise FetchError(reason, permanent=False, slow=True) from exc
    except httpx.DecodingError as exc:  # a body that says gzip but is not
        raise FetchError(f"undecodable body: {exc}", permanent=True) from exc
    except httpx.HTTPError as exc:  # refused, reset, TLS failure, broken HTTP...
        raise FetchError(f"{type(exc).__name__}: {exc}", permanent=False) from exc
