"""Every file of the shared feed and calendar corpora through the real pipeline: each
poll's counts add up to the items its payload held, and the file's items match what the
parser alone reports (one quarantined item when the whole payload is rejected)."""

from datetime import UTC, datetime
from pathlib import Path

import pytest

from ingestion.drafts import PayloadError
from ingestion.models import Poll, Source
from ingestion.parsing import parse_payload
from ingestion.polling import ingest_payload

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
if not DATA.is_dir():
    pytest.skip(f"shared corpora not found at {DATA}", allow_module_level=True)

from tests.test_calendar_corpus import FILES as CALENDAR_FILES  # noqa: E402
from tests.test_feed_corpus import CORPORA as FEED_CORPORA  # noqa: E402
from tests.test_feed_corpus import corpus_inputs  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.django_db]
FEED_FILES = [path for corpus in FEED_CORPORA for path in corpus_inputs(corpus)]
COUNTS = ("new", "updated", "unchanged", "withdrawn", "quarantined")
# A fixed "now": the calendar window, and so each file's item count, must not depend on
# the day the suite runs.
FIXED_NOW = datetime(2026, 6, 1, tzinfo=UTC)


def _expected_items(kind: str, payload: bytes) -> int:
    try:
        return parse_payload(kind, payload).items
    except PayloadError:
        return 1


def _check(kind: str, files: list[Path]) -> tuple[int, int]:
    mismatches = []
    total = 0
    for number, path in enumerate(files):
        source = Source.objects.create(name=f"{kind}-{number}", kind=kind, url=str(path))
        payload = path.read_bytes()
        poll = ingest_payload(source, payload, started_at=FIXED_NOW)
        counted = sum(getattr(poll, name) for name in COUNTS)
        expected = _expected_items(kind, payload)
        if not (poll.items == counted == expected):
            mismatches.append(f"{path}: items={poll.items} counted={counted} parser={expected}")
        total += poll.items
    assert not mismatches, "\n".join(mismatches[:20])
    return len(files), total


def test_every_feed_file_is_accounted_for() -> None:
    files, items = _check(Source.Kind.FEED, FEED_FILES)
    assert files > 2500
    assert items > 1500
    assert Poll.objects.filter(status=Poll.Status.REJECTED).count() > 0


def test_every_calendar_file_is_accounted_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ingestion.parsing.timezone.now", lambda: FIXED_NOW)
    files, items = _check(Source.Kind.CALENDAR, CALENDAR_FILES)
    assert files > 100
    assert items > 100
