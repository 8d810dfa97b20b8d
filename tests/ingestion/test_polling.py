"""Polling a source: local files, conditional re-polls, the breaker and its record."""

from pathlib import Path

import pytest
from django.test import override_settings

from ingestion.demo import DEMO_DIR
from ingestion.models import Poll, Source
from ingestion.polling import poll_source
from ingestion.scheduling import claim_due_sources
from tests.factories import FakeClock

pytestmark = pytest.mark.django_db


def _file_source(path: Path, kind: str = Source.Kind.FEED) -> Source:
    return Source.objects.create(name=str(path), kind=kind, url=str(path))


def test_a_local_file_source_is_polled_and_an_unchanged_file_is_not_reapplied() -> None:
    source = _file_source(DEMO_DIR / "publisher-feed.xml")
    first = poll_source(source.pk)
    assert (first.status, first.new) == (Poll.Status.OK, 4)
    second = poll_source(source.pk)
    assert second.status == Poll.Status.NOT_MODIFIED
    forced = poll_source(source.pk, force=True)
    assert (forced.status, forced.unchanged) == (Poll.Status.OK, 4)
    source.refresh_from_db()
    assert source.last_success_at is not None


@override_settings(SOURCE_BREAKER_MIN_CALLS=3, SOURCE_BREAKER_FAILURE_RATIO=1.0)
def test_failures_open_the_breaker_and_an_open_breaker_skips_the_fetch(tmp_path: Path) -> None:
    source = _file_source(tmp_path / "missing.xml")
    clock = FakeClock(1_000_000.0)
    statuses = []
    for _ in range(4):
        statuses.append(poll_source(source.pk, clock=clock).status)
        clock.now += 1
    assert statuses == [Poll.Status.FAILED] * 3 + [Poll.Status.SKIPPED]
    source.refresh_from_db()
    assert source.breaker_state == "open"
    assert source.last_error_permanent is True
    assert "missing.xml" in source.last_error or "No such file" in source.last_error


@override_settings(
    SOURCE_BREAKER_MIN_CALLS=1, SOURCE_BREAKER_FAILURE_RATIO=1.0, SOURCE_BREAKER_COOLDOWN_S=60
)
def test_after_the_cooldown_one_successful_probe_closes_the_breaker(tmp_path: Path) -> None:
    path = tmp_path / "feed.xml"
    source = _file_source(path)
    clock = FakeClock(1_000_000.0)
    assert poll_source(source.pk, clock=clock).status == Poll.Status.FAILED
    path.write_bytes((DEMO_DIR / "publisher-feed.xml").read_bytes())
    clock.now += 30
    assert poll_source(source.pk, clock=clock).status == Poll.Status.SKIPPED
    clock.now += 31
    assert poll_source(source.pk, clock=clock).status == Poll.Status.OK
    source.refresh_from_db()
    assert source.breaker_state == "closed"


def test_due_sources_are_claimed_once_per_interval() -> None:
    due = Source.objects.create(name="due", kind="feed", url="/x")
    Source.objects.create(name="inactive", kind="feed", url="/y", active=False)
    Source.objects.create(name="no url", kind="editorial", url="")
    assert claim_due_sources() == [due.pk]
    assert claim_due_sources() == []
