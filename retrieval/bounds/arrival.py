"""When a search request arrived: the instant its deadline counts from.

A deadline that starts when the view runs cannot see the time a request spent queued
before it (behind other requests on the event loop, in the server's accept queue, at a
proxy), so under overload every request was still given its whole budget, however late,
and answers took seconds (docs/reliability.md). The web server stamps each search request
on receipt; a proxy in front may say when *it* received the request, in
`X-Request-Start`, which is believed only when settings say the proxy sets it (and strips
what clients send), as with X-Forwarded-Proto.

Arrival instants are on the monotonic clock the deadlines use; the header's wall-clock
time is turned into one by how long ago it was, clamped to [0, MAX_QUEUED_S]: a proxy
clock ahead of ours means no wait, never a deadline in the future.
"""

import re
import time
from collections.abc import Callable

SCOPE_KEY = "searchsite.arrived_at"  # where the ASGI handler leaves the stamp
HEADER = b"x-request-start"
MAX_QUEUED_S = 60.0  # a wait longer than this is a broken clock, not a queue

# nginx's "t=${msec}" (seconds with a fraction), Heroku's milliseconds, Apache's "%t"
# microseconds: told apart by size.
_STAMP = re.compile(rb"(?:t=)?([0-9]{1,17}(?:\.[0-9]{1,6})?)")
_MS_FROM, _US_FROM = 1e11, 1e14  # 1e11 s is the year 5138; 1e11 ms is 1973


def proxy_wall_time(value: bytes) -> float | None:
    """The header's instant in seconds since the epoch, or None when it is not one."""
    match = _STAMP.fullmatch(value.strip())
    if match is None:
        return None
    stamp = float(match.group(1))
    if stamp >= _US_FROM:
        return stamp / 1e6
    if stamp >= _MS_FROM:
        return stamp / 1e3
    return stamp


def arrived_at(
    headers: list[tuple[bytes, bytes]],
    *,
    trust_header: bool,
    clock: Callable[[], float] = time.monotonic,
    wall_clock: Callable[[], float] = time.time,
) -> float:
    """The request's arrival on `clock`: now, or earlier by a trusted proxy's stamp."""
    now = clock()
    if not trust_header:
        return now
    for name, value in headers:
        if name == HEADER:
            sent = proxy_wall_time(value)
            if sent is not None:
                return now - min(max(0.0, wall_clock() - sent), MAX_QUEUED_S)
    return now
