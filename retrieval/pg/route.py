"""Which Postgres server a search's statements go to: the primary, or one of the streaming
replicas named by `SEARCH_REPLICA_URLS` (retrieval/pg/replicas.py chooses).

A search is routed once, when it starts, and its statements (the generation lookup, the
lexical and vector stages, the counts on the filters, loading the listings) follow its
route through a context variable: the tasks a search starts copy it, and all of them
share one `Route`, so a replica given up on by one statement (retrieval/pg/statement.py)
is given up on by the search's later statements too. Work that is not a search (writes,
ingestion, admin, warming, an editor's previews) has no route and reads the primary.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cache
from typing import Literal, Protocol

from django.conf import settings
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from retrieval.types import Reason


@dataclass(frozen=True)
class Server:
    """A Postgres server searches read from. `name` labels metrics ("primary",
    "replica-1", ...: as many as there are replicas); `url` is None for the primary,
    which is Django's default database."""

    name: str
    url: str | None = None


PRIMARY = Server("primary")


@cache
def replicas() -> tuple[Server, ...]:
    """The replicas of `SEARCH_REPLICA_URLS`, in its order (cleared with the settings)."""
    urls = [url.strip() for url in settings.SEARCH_REPLICA_URLS.split(",") if url.strip()]
    return tuple(Server(f"replica-{number}", url) for number, url in enumerate(urls, start=1))


def conninfo(server: Server, application_name: str) -> str:
    """How to reach `server`. A replica holds the primary's databases (physical
    replication copies the whole cluster), so it is asked for the primary's database by
    name, whatever its URL says: under tests, Django's test database."""
    db = settings.DATABASES["default"]
    if server.url is None:
        params = {
            "dbname": db["NAME"],
            "user": db.get("USER") or None,
            "password": db.get("PASSWORD") or None,
            "host": db.get("HOST") or None,
            "port": db.get("PORT") or None,
            **db.get("OPTIONS", {}),
        }
    else:
        params = {**conninfo_to_dict(server.url), "dbname": db["NAME"]}
    params["application_name"] = application_name
    return make_conninfo(**{k: v for k, v in params.items() if v is not None})


class Outcomes(Protocol):
    """What is told how each statement on a replica ended (its breaker)."""

    def answered(self, server: Server) -> None: ...

    def failed(self, server: Server, how: Literal["late", "error"]) -> None:
        """Not answered within its patience ("late"), or failed ("error")."""


@dataclass
class Route:
    """Where one search reads, and why not from a replica when it could have. A `fixed`
    route never falls back (a replica's own check must reach that replica or fail)."""

    server: Server
    reasons: list[Reason] = field(default_factory=list)
    outcomes: Outcomes | None = None
    fixed: bool = False

    def fall_back(self, reason: Reason) -> None:
        """Read the primary from now on, because of `reason`."""
        self.server = PRIMARY
        if reason not in self.reasons:
            self.reasons.append(reason)


_route: ContextVar[Route | None] = ContextVar("search_route", default=None)


def current() -> Route | None:
    return _route.get()


def current_server() -> Server:
    route = _route.get()
    return PRIMARY if route is None else route.server


@contextmanager
def routed(route: Route) -> Iterator[Route]:
    """Statements run meanwhile (and in tasks started meanwhile) follow `route`."""
    token = _route.set(route)
    try:
        yield route
    finally:
        _route.reset(token)
