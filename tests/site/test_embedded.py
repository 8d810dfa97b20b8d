"""Embedded Postgres and Valkey: start once, reuse, persist, stop without leftovers."""

import os
from collections.abc import Iterator
from pathlib import Path

import psutil
import psycopg
import pytest
import redis

from searchsite import embedded


def _processes_under(base: Path) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if str(base) in cmdline:
            found.append(process)
    return found


@pytest.fixture
def unconfigured(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("REDIS_URL", raising=False)
    yield tmp_path
    embedded.EmbeddedServices(tmp_path, ["postgres", "valkey"]).stop()


def test_it_starts_both_services_reuses_them_and_stops_cleanly(unconfigured: Path) -> None:
    first = embedded.ensure_running(unconfigured)
    assert first.started == ["postgres", "valkey"]
    database_url, redis_url = os.environ["DATABASE_URL"], os.environ["REDIS_URL"]

    # A second process (here: a second call) finds them running and does not own them.
    os.environ.pop("DATABASE_URL")
    os.environ.pop("REDIS_URL")
    second = embedded.ensure_running(unconfigured)
    assert second.started == []
    assert os.environ["DATABASE_URL"] == database_url

    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT current_database()").fetchone() == ("searchsite",)
    assert redis.Redis.from_url(redis_url).ping()

    first.stop()
    assert _processes_under(unconfigured) == []


def test_data_survives_a_restart(unconfigured: Path) -> None:
    services = embedded.ensure_running(unconfigured)
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        conn.execute("CREATE TABLE kept (note text)")
        conn.execute("INSERT INTO kept VALUES ('still here')")
    # Appended to the AOF only, no snapshot: a queued task must survive like this.
    redis.Redis.from_url(os.environ["REDIS_URL"]).rpush("queue", "task-1")
    services.stop()

    os.environ.pop("DATABASE_URL")
    os.environ.pop("REDIS_URL")
    restarted = embedded.ensure_running(unconfigured)
    assert restarted.started == ["postgres", "valkey"]
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        assert conn.execute("SELECT note FROM kept").fetchall() == [("still here",)]
    assert redis.Redis.from_url(os.environ["REDIS_URL"]).lrange("queue", 0, -1) == [b"task-1"]
    restarted.stop()


def test_configured_urls_start_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://elsewhere/db")
    monkeypatch.setenv("REDIS_URL", "redis://elsewhere:6379/0")
    services = embedded.ensure_running(tmp_path)
    assert services.started == []
    assert not (tmp_path / "pgdata").exists()
    assert not (tmp_path / "valkey").exists()
