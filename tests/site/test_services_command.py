"""`manage.py services` prints URLs that clients can use, and the services' health."""

import subprocess
import sys

import psycopg
import redis

from searchsite import embedded


def _run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "services"],
        cwd=embedded.REPO_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_it_prints_urls_that_psycopg_and_redis_can_use(child_env: dict[str, str]) -> None:
    result = _run(child_env)
    assert result.returncode == 0, result.stderr
    lines = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    with psycopg.connect(lines["DATABASE_URL"]) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    assert redis.Redis.from_url(lines["REDIS_URL"]).ping()
    assert "postgres: ok (PostgreSQL 18" in result.stdout
    assert "redis: ok" in result.stdout


def test_it_fails_and_says_so_when_a_service_is_down(child_env: dict[str, str]) -> None:
    env = child_env | {"REDIS_URL": "unix:///nonexistent/valkey.sock?db=0"}
    result = _run(env)
    assert result.returncode != 0
    assert "redis: unreachable" in result.stdout
