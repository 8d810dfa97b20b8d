"""The fault tests' own servers start on a busy machine too: the wheel gives `pg_ctl
start` 10 s, and a server still starting when it gives up is waited for, not lost."""

import subprocess
from pathlib import Path

import psycopg
import pytest

from searchsite.embedded import postgres
from tests import private_services


def test_a_start_that_pg_ctl_gave_up_on_is_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pgdata = tmp_path / "pgdata"
    real_start = postgres.start
    calls = []

    def gives_up_once(path: Path) -> None:
        calls.append(path)
        real_start(path)
        if len(calls) == 1:  # as the wheel's 10 s would: the server is up, pg_ctl is not
            raise subprocess.TimeoutExpired("pg_ctl", 10)

    monkeypatch.setattr(postgres, "start", gives_up_once)
    try:
        private_services._start(pgdata)
        assert len(calls) == 2
        with psycopg.connect(postgres.url(pgdata)) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        postgres.stop(pgdata)
