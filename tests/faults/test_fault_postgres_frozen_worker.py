"""A worker's task caught by a frozen Postgres (issue 31, item 3): its statement sent, no
answer coming, no cancel answered. It must end by the task's hard time limit, its pool
process replaced, while Postgres is still frozen; and once Postgres is back, its claim
must be released (a claim is one transaction, so it ends with the killed process's
connection) and the next sweep must embed what it had claimed.

The embedding sweep is held at its claim by a lock on the embeddings table, so its
statement is under way when Postgres freezes."""

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import psycopg
import pytest
from django.db import transaction
from django.utils import timezone

from ingestion.embedding_claim import CLAIM_TAG
from ingestion.models import Source
from ingestion.upsert import apply_draft
from tests.conftest import (
    pending_embeddings,
    start_worker,
    stop_worker,
    wait_until,
    waiting_on_a_lock,
)
from tests.factories import draft
from tests.private_services import PrivatePostgres, private_stack
from tests.search_fixtures import index_listings

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SOFT_LIMIT_S, HARD_LIMIT_S = 1.0, 2.0
# Celery's pool looks at its tasks' time limits about once a second, and the kill comes
# after a SIGTERM the blocked process has 0.1 s to act on.
KILLED_WITHIN_S = HARD_LIMIT_S + 2
NEW = ("Brass band in the park", "Pottery for beginners", "Chamber choir evensong")
VECTOR_TABLE = "ingestion_listing_embedding"


@dataclass(frozen=True)
class Stack:
    postgres: PrivatePostgres
    env: dict[str, str]


@pytest.fixture
def stack(child_env: dict[str, str], test_database_url: str, tmp_path: Path) -> Iterator[Stack]:
    index_listings()
    desk = Source.objects.create(name="Editorial desk", kind=Source.Kind.EDITORIAL)
    with transaction.atomic():  # listings waiting for their embedding
        for number, title in enumerate(NEW):
            apply_draft(desk, draft(f"new-{number}", title=title, starts_at=None), timezone.now())
    with private_stack(tmp_path, test_database_url, child_env) as private:
        yield Stack(private.postgres, private.env)


def _pool(worker_pid: int) -> set[int]:
    """The worker's live pool processes (none for a moment while one is being replaced;
    a killed one is a zombie until the worker reaps it)."""
    try:
        children = psutil.Process(worker_pid).children()
        return {c.pid for c in children if c.status() != psutil.STATUS_ZOMBIE}
    except psutil.NoSuchProcess:  # a child that ended while they were listed
        return set()


def test_a_task_stuck_on_a_frozen_postgres_ends_by_its_time_limit(stack: Stack) -> None:
    url = stack.postgres.url
    assert pending_embeddings(url) == len(NEW)
    limited = {
        **stack.env,
        "CELERY_TASK_SOFT_TIME_LIMIT_S": str(SOFT_LIMIT_S),
        "CELERY_TASK_TIME_LIMIT_S": str(HARD_LIMIT_S),
    }
    with psycopg.connect(url) as holder:
        holder.execute(f"LOCK TABLE {VECTOR_TABLE} IN ACCESS EXCLUSIVE MODE")
        # A worker asks for a sweep as it starts; the sweep's claim waits on the lock.
        worker = start_worker(limited, name="frozen-pg-worker", queues="embedding")
        try:
            wait_until(
                lambda: waiting_on_a_lock(url, f"/* {CLAIM_TAG} */%"), 60, "the claim to block"
            )
            stuck = _pool(worker.pid)
            with stack.postgres.frozen():
                frozen_at = time.monotonic()
                wait_until(
                    lambda: not stuck & _pool(worker.pid),
                    KILLED_WITHIN_S + 5,
                    "the stuck task's pool process to end",
                )
                ended_s = time.monotonic() - frozen_at
                wait_until(lambda: bool(_pool(worker.pid)), 10, "a pool process in its place")
            holder.rollback()
        finally:
            stop_worker(worker)
    assert ended_s <= KILLED_WITHIN_S, ended_s
    # Its claim went with its connection: the next sweep, by a worker with the default
    # limits (loading the model alone takes about the short limit), embeds every listing.
    worker = start_worker(stack.env, name="thawed-pg-worker", queues="embedding", purge=False)
    try:
        wait_until(lambda: pending_embeddings(url) == 0, 60, "every pending embedding")
    finally:
        stop_worker(worker)
