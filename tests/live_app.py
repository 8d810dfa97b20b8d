"""The project's ASGI app served over real HTTP, on the test database, for tests that need a
client outside this process (Schemathesis, a browser).

A pytest plugin: a test module says `pytest_plugins = ["tests.live_app"]` and asks for
`live_app`. The server is the one `make run` starts (the supervisor's uvicorn command),
on a free loopback port, for the whole session. What it writes is not inside any test's
transaction, so a test that makes it write should be `django_db(transaction=True)`: the
tables are emptied after it, as after any transactional test."""

import os
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from searchsite import embedded
from searchsite.supervisor import web_argv
from tests.conftest import free_port, wait_until

# Importing the app loads the embedding model, which takes a while on a loaded machine.
READY_TIMEOUT_S = 120
STOP_TIMEOUT_S = 10


@dataclass(frozen=True)
class LiveApp:
    url: str  # "http://127.0.0.1:PORT"


def _answers(server: subprocess.Popen[bytes], url: str) -> bool:
    assert server.poll() is None, f"the web server exited with {server.returncode}"
    try:
        httpx.get(f"{url}/healthz", timeout=2)  # any status: it is serving requests
    except httpx.HTTPError:
        return False
    return True


@pytest.fixture(scope="session")
def live_app(child_env: dict[str, str]) -> Iterator[LiveApp]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        web_argv(port, log_level="warning"),
        cwd=embedded.REPO_DIR,
        env=child_env,
        start_new_session=True,
    )
    try:
        wait_until(lambda: _answers(server, url), READY_TIMEOUT_S, f"the web server on {url}")
        yield LiveApp(url)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
