"""At-least-once delivery made exactly-once by idempotence: a real worker killed in the
middle of a batch loses nothing and duplicates nothing."""

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psutil
import psycopg
import pytest

from ingestion.models import Listing, Poll, Source, SourceRecord
from ingestion.polling import poll_source
from ingestion.tasks import poll_source as poll_source_task
from tests.conftest import start_worker, stop_worker, wait_until, waiting_on_a_lock
from tests.feeds import numbered_rss

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
ITEMS = 200
BLOCKED_ITEM = 120


def _feed(version: str) -> bytes:
    return numbered_rss(ITEMS, version)


@pytest.fixture
def worker(child_env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    process = start_worker(child_env, name="kill-worker")
    yield process
    stop_worker(process)


def test_a_worker_killed_mid_batch_loses_and_duplicates_nothing(
    worker: subprocess.Popen[bytes], test_database_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "feed.xml"
    path.write_bytes(_feed("v1"))
    source = Source.objects.create(name="big feed", kind=Source.Kind.FEED, url=str(path))
    assert poll_source(source.pk).new == ITEMS
    path.write_bytes(_feed("v2"))

    # Hold the row lock the batch needs at item BLOCKED_ITEM: the worker applies the items
    # before it inside its transaction, then waits; then it is killed.
    blocker = psycopg.connect(test_database_url)
    blocker.execute(
        "SELECT 1 FROM ingestion_sourcerecord WHERE source_id = %s AND external_id = %s FOR UPDATE",
        [source.pk, f"g{BLOCKED_ITEM}"],
    )
    poll_source_task.delay(source.pk)
    wait_until(lambda: waiting_on_a_lock(test_database_url), 60, "the batch to block")
    (child,) = psutil.Process(worker.pid).children()
    os.kill(child.pid, signal.SIGKILL)
    blocker.rollback()
    blocker.close()

    # The lost task is rejected back to the queue and redelivered to a fresh child.
    wait_until(
        lambda: Poll.objects.filter(source=source, status=Poll.Status.OK).count() == 2,
        60,
        "the redelivered batch to complete",
    )
    assert child.pid not in [c.pid for c in psutil.Process(worker.pid).children()]
    final = Poll.objects.filter(source=source, status=Poll.Status.OK).latest("pk")
    assert (final.items, final.updated) == (ITEMS, ITEMS)
    assert SourceRecord.objects.filter(source=source).count() == ITEMS
    assert Listing.objects.count() == ITEMS
    assert set(Listing.objects.values_list("description", flat=True)) == {"Details v2"}
    assert Listing.objects.filter(content_version=2).count() == ITEMS
