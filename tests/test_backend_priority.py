"""A worker's lower CPU priority reaches Postgres: each connection a thread at a raised
niceness opens, Django's or a search pool's, has its backend run at that niceness
(resilience/backend_priority.py); a connection opened at niceness 0 (the web's) is left
as it was. Niceness is per thread on Linux, so a thread of this process stands in for a
worker at WORKER_NICE without lowering the rest of the test run."""

import asyncio
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import psutil
import pytest
from django.db import connection, connections

from resilience.backend_priority import BACKEND_SQL, local_backend, lower_backend
from retrieval import pg

pytestmark = pytest.mark.django_db(transaction=True)
RAISED = 7
T = TypeVar("T")


@pytest.fixture(autouse=True)
def server_niceness() -> int:
    """The niceness of this test's own backend, opened at this thread's niceness; skips
    where the server is not a process of this machine (a DATABASE_URL elsewhere)."""
    with connection.cursor() as cursor:
        cursor.execute(BACKEND_SQL)
        pid, data_directory = cursor.fetchone()
    if not local_backend(pid, data_directory):
        pytest.skip("the test database's server runs elsewhere: its backends are not ours")
    return psutil.Process(pid).nice()


def _at_raised_niceness(work: Callable[[], T]) -> T:
    """`work`'s result, run on a thread of its own whose niceness is raised by RAISED."""

    def run() -> T:
        os.setpriority(os.PRIO_PROCESS, 0, os.getpriority(os.PRIO_PROCESS, 0) + RAISED)
        try:
            return work()
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=1) as thread:
        return thread.submit(run).result(timeout=30)


def _backend_niceness() -> tuple[int, int]:
    """(this thread's niceness, its Django connection's backend's)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    return os.getpriority(os.PRIO_PROCESS, 0), psutil.Process(pid).nice()


def test_a_django_connection_opened_at_a_raised_niceness_runs_its_backend_there(
    server_niceness: int,
) -> None:
    client, backend = _at_raised_niceness(_backend_niceness)
    assert backend == client > server_niceness
    assert _backend_niceness()[1] == server_niceness  # this thread's own: untouched


def test_a_search_pool_connection_opened_at_a_raised_niceness_runs_its_backend_there(
    server_niceness: int,
) -> None:
    async def pooled() -> tuple[int, int]:
        try:
            async with pg.connection(5.0) as conn:
                row = await (await conn.execute("SELECT pg_backend_pid()")).fetchone()
                assert row is not None
                return os.getpriority(os.PRIO_PROCESS, 0), psutil.Process(row[0]).nice()
        finally:
            await pg.close_pool()

    client, backend = _at_raised_niceness(lambda: asyncio.run(pooled()))
    assert backend == client > server_niceness


def test_a_process_that_is_no_backend_of_the_server_is_left_alone() -> None:
    """A PID from a server elsewhere names some process here: this one, say."""
    with connection.cursor() as cursor:
        cursor.execute(BACKEND_SQL)
        _, data_directory = cursor.fetchone()
    ours = os.getpid()
    before = os.getpriority(os.PRIO_PROCESS, ours)
    assert not lower_backend(ours, data_directory, before + RAISED)
    assert not lower_backend(ours, None, before + RAISED)
    assert os.getpriority(os.PRIO_PROCESS, ours) == before
