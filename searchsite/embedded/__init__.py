"""Embedded Postgres and Valkey for machines without database servers.

When `DATABASE_URL` / `REDIS_URL` are set, nothing here runs: the same code talks to real
servers. Otherwise the first process that needs a service starts it under the run
directory (`SEARCHSITE_RUN_DIR`, default `<repo>/.run`) and every later process reuses it.
Whoever starts a service owns it and stops it; processes that found it running leave it.
"""

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from searchsite.embedded import postgres, replica, valkey

REPO_DIR = Path(__file__).resolve().parents[2]


def run_dir() -> Path:
    return Path(os.environ.get("SEARCHSITE_RUN_DIR") or REPO_DIR / ".run").resolve()


def pgdata_dir(base: Path) -> Path:
    return base / "pgdata"


def valkey_dir(base: Path) -> Path:
    return base / "valkey"


def replica_dir(base: Path, number: int) -> Path:
    return base / "replicas" / str(number)


def default_database_url() -> str:
    return postgres.url(pgdata_dir(run_dir()))


def default_replica_urls() -> str:
    """The running replicas `SEARCH_REPLICAS=N make run` started, comma-separated."""
    found = sorted((run_dir() / "replicas").glob("*"), key=lambda path: path.name)
    return ",".join(replica.url(path) for path in found if postgres.is_running(path))


def default_redis_url() -> str:
    return valkey.url(valkey_dir(run_dir()))


@dataclass
class EmbeddedServices:
    """The embedded services this process started (and so must stop)."""

    base: Path
    started: list[str] = field(default_factory=list)

    def stop(self) -> None:
        # Reverse order: replicas before their primary, and Valkey before Postgres only
        # if it was started after it.
        for name in reversed(self.started):
            if name == "postgres":
                postgres.stop(pgdata_dir(self.base))
            elif name.startswith("replica-"):
                replica.stop(replica_dir(self.base, int(name.removeprefix("replica-"))))
            else:
                valkey.stop(valkey_dir(self.base))
        self.started.clear()


@contextmanager
def _exclusive(base: Path) -> Iterator[None]:
    base.mkdir(parents=True, exist_ok=True)
    with open(base / "services.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def ensure_running(base: Path | None = None) -> EmbeddedServices:
    """Start whichever service is unconfigured and not yet running; export its URL."""
    base = base or run_dir()
    services = EmbeddedServices(base)
    with _exclusive(base):
        if not os.environ.get("DATABASE_URL"):
            pgdata = pgdata_dir(base)
            if not postgres.is_running(pgdata):
                postgres.start(pgdata)
                services.started.append("postgres")
            os.environ["DATABASE_URL"] = postgres.url(pgdata)
        if not os.environ.get("REDIS_URL"):
            data = valkey_dir(base)
            if not valkey.is_running(data):
                valkey.start(data)
                services.started.append("valkey")
            os.environ["REDIS_URL"] = valkey.url(data)
    return services


def ensure_replicas(services: EmbeddedServices, count: int) -> None:
    """Streaming replicas of the embedded Postgres, `count` of them (each a base backup
    the first time, then restarted from its own data directory), and
    `SEARCH_REPLICA_URLS` naming them for the processes started after."""
    primary = pgdata_dir(services.base)
    urls = []
    with _exclusive(services.base):
        for number in range(1, count + 1):
            data = replica_dir(services.base, number)
            if not postgres.is_running(data):
                replica.start(primary, data)
                services.started.append(f"replica-{number}")
            urls.append(replica.url(data))
    os.environ["SEARCH_REPLICA_URLS"] = ",".join(urls)
