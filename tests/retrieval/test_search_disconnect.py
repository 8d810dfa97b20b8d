"""A real client that disconnects mid-search leaves no statement of its request running."""

import os
import signal
import socket
import subprocess
from collections.abc import Iterator

import httpx
import psycopg
import pytest

from searchsite.supervisor import web_argv
from tests.conftest import free_port, wait_until
from tests.search_fixtures import index_listings

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def server(child_env: dict[str, str]) -> Iterator[str]:
    index_listings()
    port = free_port()
    # Generous budgets: the search must still be waiting in Postgres when the client leaves.
    env = child_env | {
        "SEARCH_DEADLINE_MS": "20000",
        "SEARCH_VECTOR_BUDGET_MS": "15000",
        "SEARCH_CALLER_TIMEOUT_CAP_MS": "20000",
    }
    process = subprocess.Popen(
        web_argv(port, "warning"),
        env=env,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        try:
            return httpx.get(f"{base}/api/search", params={"q": "warm up"}, timeout=5).is_success
        except httpx.HTTPError:
            return False

    try:
        wait_until(answers, 60, "the web server")
        yield base
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(30)


def _waiting_statements(observer: psycopg.Connection, holder_pid: int) -> int:
    row = observer.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND pid NOT IN (pg_backend_pid(), %s) AND state = 'active'",
        [holder_pid],
    ).fetchone()
    return int(row[0]) if row else 0


def test_a_disconnecting_client_leaves_no_running_statement(
    server: str, test_database_url: str
) -> None:
    warm = httpx.get(f"{server}/api/search", params={"q": "jazz"}, timeout=10).json()
    assert warm["mode"] == "hybrid", warm  # pools, the model: everything is up
    holder = psycopg.connect(test_database_url)
    observer = psycopg.connect(test_database_url, autocommit=True)
    try:
        holder.execute(
            "LOCK TABLE ingestion_listing, ingestion_listing_embedding IN ACCESS EXCLUSIVE MODE"
        )
        host, port = server.removeprefix("http://").split(":")
        client = socket.create_connection((host, int(port)))
        client.sendall(b"GET /api/search?q=jazz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        pid = holder.info.backend_pid
        # Both stages are now waiting for the locks inside Postgres.
        wait_until(lambda: _waiting_statements(observer, pid) == 2, 30, "both stages")
        client.close()  # the client goes away
        wait_until(lambda: _waiting_statements(observer, pid) == 0, 2, "their cancellation")
        # The locks are still held: the statements were cancelled, they did not finish.
        assert holder.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
    finally:
        holder.rollback()
        holder.close()
        observer.close()
