"""An import that outgrows the planner's statistics of the listings or of their records
has them analysed at once, not a minute later by autovacuum; a small one leaves them be."""

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from pytest_django import DjangoCaptureOnCommitCallbacks

from ingestion.batches import apply_parse_result
from ingestion.drafts import ParseResult
from ingestion.planner_statistics import MIN_CHANGED, TABLES
from tests.factories import CONCERT_START, draft, source

pytestmark = pytest.mark.django_db


def estimated_rows() -> dict[str, float]:
    """What the planner believes each table holds (set by its last analysis)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname, reltuples FROM pg_class WHERE oid = ANY(%s::regclass[])",
            [list(TABLES)],
        )
        return dict(cursor.fetchall())


@pytest.fixture
def imported(
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> Callable[[int], dict[str, float]]:
    """Imports `size` new listings, after-commit work included, onto freshly analysed
    tables; returns what the planner believed before."""

    def apply(size: int) -> dict[str, float]:
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {', '.join(TABLES)}")
        before = estimated_rows()
        result = ParseResult(
            drafts=[
                draft(f"item-{n}", title=f"Recital {n}", starts_at=CONCERT_START + timedelta(n))
                for n in range(size)
            ]
        )
        with django_capture_on_commit_callbacks(execute=True):
            apply_parse_result(
                source(), result, fetched_at=timezone.now(), started_at=timezone.now()
            )
        return before

    return apply


def test_an_import_that_outgrows_the_statistics_has_listings_and_records_analysed(
    imported: Callable[[int], dict[str, float]],
) -> None:
    size = 2 * MIN_CHANGED
    before = imported(size)
    assert estimated_rows() == {table: before[table] + size for table in TABLES}


def test_a_small_import_leaves_the_statistics_to_autovacuum(
    imported: Callable[[int], dict[str, float]],
) -> None:
    before = imported(MIN_CHANGED // 2)
    assert estimated_rows() == before
