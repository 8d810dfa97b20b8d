"""The project's ASGI app over real HTTP, for tests that need a real client (a browser,
schemathesis): uvicorn as `make run` starts it (searchsite/supervisor.py's web command), in
a subprocess of its own, over the test database and the session's Redis, on loopback only.

A test that gives the app listings must commit them (`transaction=True`): the app reads
the database through connections of its own."""

import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
import pytest

from searchsite import embedded
from searchsite.supervisor import web_argv
from tests.conftest import free_port, wait_until

# Loading the query model before the first request takes a few seconds, more on a loaded
# machine; uvicorn answers only after it.
READY_TIMEOUT_S = 120
STOP_TIMEOUT_S = 20


@dataclass(frozen=True)
class LiveApp:
    url: str  # "http://127.0.0.1:PORT"
    process: "subprocess.Popen[bytes]"


@contextmanager
def serving(env: dict[str, str]) -> Iterator[LiveApp]:
    """The app under uvicorn with `env`, answering on a free loopback port meanwhile."""
    port = free_port()
    process = subprocess.Popen(
        web_argv(port, log_level="warning"),
        cwd=embedded.REPO_DIR,
        env=env,
        start_new_session=True,
    )
    app = LiveApp(f"http://127.0.0.1:{port}", process)
    try:
        wait_until(lambda: _answers(app), READY_TIMEOUT_S, f"the live app on port {port}")
        yield app
    finally:
        _stop(process)


def _answers(app: LiveApp) -> bool:
    assert app.process.poll() is None, f"the live app exited with {app.process.returncode}"
    try:
        return httpx.get(f"{app.url}/", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _stop(process: "subprocess.Popen[bytes]") -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)  # uvicorn finishes the requests in hand
    try:
        process.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@pytest.fixture(scope="session")
def live_app(child_env: dict[str, str]) -> Iterator[LiveApp]:
    """The app as configured, for the whole session (stopped before the test database is
    dropped: it depends on it through `child_env`)."""
    with serving(child_env) as app:
        yield app
