"""An ingestion worker killed in the middle of a batch, under search load (issue 12, item
3; without load: tests/ingestion/test_worker_kill.py): the batch is redelivered and applied once,
nothing lost or duplicated, and every search meanwhile answers truthfully, no 5xx.

The app and the worker use a Valkey of the test's own."""

import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import psycopg
import pytest

from ingestion.models import Listing, Poll, Source
from ingestion.polling import poll_source
from ingestion.tasks import poll_source as poll_source_task
from searchsite.celery import app as celery_app
from tests.conftest import start_worker, stop_worker, wait_until, waiting_on_a_lock
from tests.feeds import numbered_rss
from tests.live_app import LiveApp, serving
from tests.load_driver import (
    RATE,
    Load,
    hung,
    server_errors,
    serves_normally,
    under_load,
    untruthful,
)
from tests.private_services import FAULT_SETTINGS, PrivateValkey, private_valkey
from tests.search_fixtures import index_listings

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

QUERIES = ["jazz", "bread", "organ recital", "science fair", "Event number"]
SECONDS = 3.0
ITEMS = 100
BLOCKED_ITEM = 60


@dataclass(frozen=True)
class Stack:
    app: LiveApp
    valkey: PrivateValkey
    worker_pid: int


def _feed(version: str) -> bytes:
    return numbered_rss(ITEMS, version)


@pytest.fixture
def stack(child_env: dict[str, str], tmp_path: Path) -> Iterator[Stack]:
    index_listings()
    with private_valkey(tmp_path) as valkey:
        env = {**child_env, **FAULT_SETTINGS, "REDIS_URL": valkey.url}
        worker = start_worker(env, name="ingest-fault-worker", queues="ingestion")
        try:
            with serving(env) as app:
                yield Stack(app, valkey, worker.pid)
        finally:
            stop_worker(worker)


def test_an_ingestion_worker_killed_mid_batch_under_load(
    stack: Stack, test_database_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "feed.xml"
    path.write_bytes(_feed("v1"))
    source = Source.objects.create(name="big feed", kind=Source.Kind.FEED, url=str(path))
    assert poll_source(source.pk).new == ITEMS
    path.write_bytes(_feed("v2"))
    wait_until(lambda: serves_normally(stack.app.url, QUERIES), 60, "hybrid answers")

    load = Load(stack.app.url, QUERIES, RATE, SECONDS)
    with under_load(load), psycopg.connect(test_database_url) as blocker:
        # The batch applies the items before BLOCKED_ITEM, waits on its row, is killed.
        blocker.execute(
            "SELECT 1 FROM ingestion_sourcerecord"
            " WHERE source_id = %s AND external_id = %s FOR UPDATE",
            [source.pk, f"g{BLOCKED_ITEM}"],
        )
        with celery_app.connection_for_write(stack.valkey.broker_url) as broker:
            celery_app.send_task(poll_source_task.name, (source.pk,), connection=broker)
        wait_until(lambda: waiting_on_a_lock(test_database_url), 30, "the batch to block")
        (child,) = psutil.Process(stack.worker_pid).children()
        os.kill(child.pid, signal.SIGKILL)
        blocker.rollback()

    wait_until(
        lambda: Poll.objects.filter(source=source, status=Poll.Status.OK).count() == 2,
        60,
        "the redelivered batch to complete",
    )
    final = Poll.objects.filter(source=source, status=Poll.Status.OK).latest("pk")
    assert (final.items, final.updated) == (ITEMS, ITEMS)
    assert Listing.objects.filter(records__source=source).count() == ITEMS
    assert Listing.objects.filter(content_version=2).count() == ITEMS
    samples = load.samples
    assert hung(samples) == []
    assert server_errors(samples) == []
    assert untruthful(samples) == []
