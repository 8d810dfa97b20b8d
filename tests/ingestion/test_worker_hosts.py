"""Workers on several hosts (issue 36): the queues consumed by two Celery workers, each in
a process group of its own, as if each ran on a host of its own. One of them lost whole in
the middle of a batch (its main process and its pool killed at once, so no one is left to
hand the batch back) loses nothing: past the visibility timeout the other host takes it
from the broker; and nothing is applied twice. The listings the batch changed are then
embedded by the surviving host, each once."""

import os
import signal
from pathlib import Path

import psycopg
import pytest

from ingestion.embedding import DIMENSIONS, MODEL_NAME
from ingestion.generations import ensure_active_generation
from ingestion.models import Listing, ListingEmbedding, Poll, Source, SourceRecord
from ingestion.polling import poll_source
from ingestion.tasks import poll_source as poll_source_task
from tests.conftest import start_worker, stop_worker, wait_until, waiting_on_a_lock
from tests.feeds import numbered_rss

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
ITEMS = 200
BLOCKED_ITEM = 120
# A lost task comes back after the visibility timeout, which must outlast the hard time
# limit (searchsite/checks.py): both short here, so the test waits seconds, not minutes.
SHORT_LIMITS = {
    "CELERY_TASK_SOFT_TIME_LIMIT_S": "15",
    "CELERY_TASK_TIME_LIMIT_S": "20",
    "CELERY_VISIBILITY_TIMEOUT_S": "25",
}
# The timeout, the surviving host's next look (every quarter of the timeout:
# searchsite/celery.py's unacked_restore_interval, looked at each time), the batch. Well
# short of kombu's own pace, which looks only every tenth interval (62.5 s here).
TAKEN_OVER_S = 25 + 25 / 4 + 20


def test_a_host_lost_mid_batch_leaves_it_to_the_other_which_applies_it_once(
    child_env: dict[str, str], test_database_url: str, tmp_path: Path
) -> None:
    env = child_env | SHORT_LIMITS
    generation = ensure_active_generation(MODEL_NAME, DIMENSIONS)
    path = tmp_path / "feed.xml"
    path.write_bytes(numbered_rss(ITEMS, "v1"))
    source = Source.objects.create(name="big feed", kind=Source.Kind.FEED, url=str(path))
    assert poll_source(source.pk).new == ITEMS
    path.write_bytes(numbered_rss(ITEMS, "v2"))

    # The batch blocks at item BLOCKED_ITEM on a row lock, on the first host, which is then
    # lost whole while the second is running.
    blocker = psycopg.connect(test_database_url)
    blocker.execute(
        "SELECT 1 FROM ingestion_sourcerecord WHERE source_id = %s AND external_id = %s FOR UPDATE",
        [source.pk, f"g{BLOCKED_ITEM}"],
    )
    first = start_worker(env, name="host-a")
    second = None
    try:
        poll_source_task.delay(source.pk)
        wait_until(lambda: waiting_on_a_lock(test_database_url), 60, "the batch to block")
        second = start_worker(env, name="host-b", purge=False)
        os.killpg(first.pid, signal.SIGKILL)  # its own session: the main process and its pool
        first.wait()
        blocker.rollback()
        blocker.close()

        wait_until(
            lambda: Poll.objects.filter(source=source, status=Poll.Status.OK).count() == 2,
            TAKEN_OVER_S,
            "the lost batch taken by the other host",
        )
        final = Poll.objects.filter(source=source, status=Poll.Status.OK).latest("pk")
        assert (final.items, final.updated) == (ITEMS, ITEMS)
        assert SourceRecord.objects.filter(source=source).count() == ITEMS
        assert Listing.objects.count() == ITEMS
        # Applied once: one new content version each, not two.
        assert set(Listing.objects.values_list("content_version", flat=True)) == {2}

        embedded = ListingEmbedding.objects.filter(generation=generation, content_version=2)
        wait_until(lambda: embedded.count() == ITEMS, 120, "the changed listings embedded")
        assert ListingEmbedding.objects.filter(generation=generation).count() == ITEMS
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
        if second is not None:
            stop_worker(second)
