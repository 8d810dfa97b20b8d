"""The embedding lag is read from Postgres at most once every EMBEDDING_LAG_REFRESH_S per
process, however often it is scraped, and its oldest wait keeps counting in between."""

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from pytest_django.fixtures import Settings

from ingestion.embedding_lag import PENDING_SQL, embedding_lag
from ingestion.upsert import apply_draft
from tests.factories import FakeClock, draft, source
from tests.search_fixtures import index_listings

pytestmark = pytest.mark.django_db


def _asked(queries: CaptureQueriesContext) -> int:
    return sum(PENDING_SQL in query["sql"] for query in queries.captured_queries)


def test_scrapes_within_the_refresh_share_one_answer_aged_by_the_time_since(
    settings: Settings,
) -> None:
    settings.EMBEDDING_LAG_REFRESH_S = 5.0
    index_listings()
    with transaction.atomic():  # a listing no embedding worker has seen
        apply_draft(source("Desk"), draft("waiting", starts_at=None), timezone.now())
    clock = FakeClock()
    with CaptureQueriesContext(connection) as queries:
        first = embedding_lag(clock)
        clock.advance(3.0)
        second = embedding_lag(clock)
    assert _asked(queries) == 1
    assert first is not None
    assert second is not None
    assert first.oldest_s is not None
    assert second.pending == first.pending == 1
    assert second.oldest_s == pytest.approx(first.oldest_s + 3.0)


def test_past_the_refresh_the_lag_is_read_again(settings: Settings) -> None:
    settings.EMBEDDING_LAG_REFRESH_S = 5.0
    index_listings()
    clock = FakeClock()
    with CaptureQueriesContext(connection) as queries:
        before = embedding_lag(clock)
        with transaction.atomic():
            apply_draft(source("Desk"), draft("waiting", starts_at=None), timezone.now())
        clock.advance(5.0)
        after = embedding_lag(clock)
    assert _asked(queries) == 2
    assert before is not None
    assert before.pending == 0
    assert after is not None
    assert after.pending == 1
