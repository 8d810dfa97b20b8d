"""A web process's Django statements get an answer from Postgres within a bound, or are
broken off.

The search's own statements are bounded by its deadline (retrieval/pg/statement.py); the
rest of a web process (the admin, the editorial API, the health checks, the metrics'
database gauges) talks to Postgres through Django's synchronous connections, and a frozen
server (a paused VM, a stalled disk) answers neither a statement nor a cancel request: a
request waited as long as the server was frozen. A server-side statement_timeout cannot
help, the server being what is stopped, and a blocked synchronous call cannot be
cancelled from its own thread. So one watchdog thread per process holds the round trips
under way. Past its bound, one is told from a statement that is merely long by a probe: a
new connection, which a working server takes at once and a frozen one never (creating an
index at 100,000 listings takes seconds, and must not be cut). If the probe gets no
answer either, the round trip's socket is shut down, which wakes the blocked call with an
error (psycopg's OperationalError: "server closed the connection unexpectedly"). The
connection is left broken, and Django closes it at the request's end. The round trips
are watched by the project's database backend (searchsite/postgres_backend), and a
request whose database broke off gets a 503 in plain words (searchsite/errors.py).

Hand-written: Django has no client-side statement timeout, and libpq's own options
(tcp_user_timeout, keepalives) see a frozen server's kernel answering for it.
"""

import heapq
import itertools
import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from django.conf import settings

logger = logging.getLogger(__name__)

# How long a probe of an overdue round trip's server waits for a new connection (libpq's
# least connect_timeout).
PROBE_TIMEOUT_S = 2


@dataclass(frozen=True)
class _Watched:
    fd: int  # the round trip's socket
    dsn: str  # where a probe connects, and as whom
    password: str | None
    seconds: float


class _Watchdog:
    """The round trips under way, by when each must have its answer; one thread breaks
    off those past it, once a probe found the server not answering at all."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._due: list[tuple[float, int]] = []  # a heap of (instant, token)
        self._watched: dict[int, _Watched] = {}  # by token, while under way
        self._tokens = itertools.count()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Its thread running (once per process: a thread started later, under a stall,
        would look like one the stall made)."""
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="stalled-database", daemon=True
                )
                self._thread.start()

    def watch(self, watched: _Watched) -> int:
        self.start()
        with self._lock:
            token = next(self._tokens)
            self._watched[token] = watched
            heapq.heappush(self._due, (time.monotonic() + watched.seconds, token))
            self._lock.notify()
            return token

    def done(self, token: int) -> None:
        with self._lock:
            self._watched.pop(token, None)

    def _run(self) -> None:
        with self._lock:
            while True:
                while self._due and self._due[0][1] not in self._watched:
                    heapq.heappop(self._due)  # answered in time
                if not self._due:
                    self._lock.wait()
                    continue
                at, token = self._due[0]
                if (wait := at - time.monotonic()) > 0:
                    self._lock.wait(wait)
                    continue
                heapq.heappop(self._due)
                watched = self._watched[token]
                self._lock.release()  # the probe takes a while; round trips go on meanwhile
                try:
                    alive = _answers(watched)
                finally:
                    self._lock.acquire()
                if token not in self._watched:
                    continue  # answered while the server was probed
                if alive:  # a long statement, not a stalled server: another bound
                    heapq.heappush(self._due, (time.monotonic() + watched.seconds, token))
                else:
                    _break_off(self._watched.pop(token).fd)


def _answers(watched: _Watched) -> bool:
    """Whether Postgres takes a new connection within the probe's time: a server that
    does (a backend authenticated it and said it is ready) is working, however long a
    statement of its takes; a frozen one never does."""
    try:
        psycopg.connect(
            watched.dsn,
            password=watched.password,
            connect_timeout=PROBE_TIMEOUT_S,
            application_name="searchsite-stall-probe",
        ).close()
    except psycopg.Error:
        return False
    return True


def _break_off(fd: int) -> None:
    logger.warning("Postgres answers nothing: breaking a round trip's connection off")
    try:
        # A socket object over a duplicate of the descriptor: shutting it down shuts the
        # connection's socket down (both descriptors name it), and closing the duplicate
        # leaves the connection's own descriptor to psycopg.
        with socket.socket(fileno=socket.dup(fd)) as sock:
            sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # closed meanwhile: the round trip has ended


_watchdog = _Watchdog()
_enabled = False


def enable() -> None:
    """Bound this process's round trips from now on (web processes only: a worker's long
    statements are bounded by Celery's time limits)."""
    global _enabled  # one switch per process, thrown once at start-up
    _enabled = True
    _watchdog.start()


@contextmanager
def watched(connection: Any) -> Iterator[None]:
    """A round trip on `connection` (a psycopg connection, or None) meanwhile, broken off
    past DATABASE_STALL_TIMEOUT_S."""
    if not _enabled or connection is None or connection.closed:
        yield
        return
    info = connection.info
    token = _watchdog.watch(
        _Watched(
            connection.pgconn.socket, info.dsn, info.password, settings.DATABASE_STALL_TIMEOUT_S
        )
    )
    try:
        yield
    finally:
        _watchdog.done(token)
