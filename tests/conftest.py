import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import pytest
from django.conf import settings
from django.db import connection

from searchsite.celery import QUEUES
from searchsite.heartbeat import HEARTBEAT_KEY
from searchsite.redis_client import get_redis


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll for a condition another process brings about; fail after a bounded time."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.05)


@pytest.fixture(scope="session")
def test_database_url(django_db_setup: None, django_db_blocker: object) -> str:
    """DATABASE_URL of the test database, for processes a test starts (e.g. a worker)."""
    params = connection.get_connection_params()
    host, port = params.get("host", ""), params.get("port", "")
    user, password = params.get("user", ""), params.get("password", "")
    name = settings.DATABASES["default"]["NAME"]
    auth = f"{user}:{password}@" if password else f"{user}@"
    if host.startswith("/"):
        return f"postgresql://{auth}/{name}?host={host}"
    return f"postgresql://{auth}{host}:{port}/{name}"


@pytest.fixture(scope="session")
def child_env(test_database_url: str) -> dict[str, str]:
    env = dict(os.environ)
    env["DATABASE_URL"] = test_database_url
    env["REDIS_URL"] = settings.REDIS_URL
    return env


def start_worker(
    env: dict[str, str], *, name: str, concurrency: int = 1
) -> subprocess.Popen[bytes]:
    """A real Celery worker process consuming every queue; returns once it is running."""
    hostname = f"{name}-{os.getpid()}@localhost"
    # Tasks queued by earlier tests (embedding sweeps, polls) must not run in this one.
    get_redis().delete(*QUEUES)
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "searchsite",
            "worker",
            "--loglevel=WARNING",
            "--queues=ingestion,embedding,warming",
            f"--concurrency={concurrency}",
            f"--hostname={hostname}",
        ],
        env=env,
        start_new_session=True,
    )
    redis = get_redis()
    wait_until(lambda: redis.hexists(HEARTBEAT_KEY, hostname), 60, "the worker's heartbeat")
    return worker


def stop_worker(worker: subprocess.Popen[bytes]) -> None:
    os.killpg(worker.pid, signal.SIGTERM)
    try:
        worker.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()


@pytest.fixture(scope="module")
def celery_worker(child_env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    worker = start_worker(child_env, name="test-worker")
    yield worker
    stop_worker(worker)
