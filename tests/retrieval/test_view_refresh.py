"""Beat's refreshes of the views searches read: only when a listing changed since the last
one or the views grew old, and on one core."""

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection
from prometheus_client import REGISTRY
from pytest_django.fixtures import Settings

from ingestion.models import Listing
from retrieval.pg import views, vocabulary
from retrieval.tasks import refresh_suggestions, refresh_vocabulary
from tests.conftest import wait_until

WORD = "zyzzyvaphone"


def in_vocabulary(word: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT EXISTS (SELECT FROM retrieval_vocabulary WHERE word = %s)", [word])
        row = cursor.fetchone()
    return bool(row and row[0])


@pytest.mark.django_db
def test_the_views_are_refreshed_after_a_listing_changed_or_once_they_are_old(
    settings: Settings,
) -> None:
    settings.SEARCH_VIEWS_MAX_AGE_S = 3600
    changes, now = [7], [1_000_000.0]

    def stale() -> bool:
        return views.refresh_if_stale(
            vocabulary.VIEWS, changes=lambda: changes[0], clock=lambda: now[0]
        )

    assert stale()  # never refreshed before
    Listing.objects.create(title=f"{WORD.title()} evening")
    now[0] += 300
    assert not stale()  # no change counted, and younger than the longest age
    assert not in_vocabulary(WORD)

    changes[0] += 1
    assert stale()
    assert in_vocabulary(WORD)

    now[0] += 3599
    assert not stale()
    now[0] += 1
    assert stale()  # as old as the longest age allows


def rounds(views: str, outcome: str) -> float:
    labels = {"views": views, "outcome": outcome}
    return REGISTRY.get_sample_value("retrieval_view_rounds_total", labels) or 0.0


@pytest.mark.django_db
def test_each_kind_of_view_keeps_its_own_record_of_its_last_refresh() -> None:
    before = {
        (views, outcome): rounds(views, outcome)
        for views in ("retrieval_vocabulary", "retrieval_suggestion")
        for outcome in ("refreshed", "unchanged")
    }
    assert refresh_vocabulary()
    assert refresh_suggestions()  # not answered by the vocabulary's record
    # Nothing changed in between, and Postgres counted no change since either.
    assert not refresh_vocabulary()
    assert not refresh_suggestions()
    # Each round counted for ops, by its views and outcome.
    counted = {key: rounds(*key) - count for key, count in before.items()}
    assert counted == dict.fromkeys(before, 1.0)


@pytest.mark.django_db(transaction=True)
def test_the_count_of_listing_changes_moves_with_each_committed_change() -> None:
    before = views.listing_changes()
    listing = Listing.objects.create(title="Counted recital")
    listing.title = "Counted recital, moved"
    listing.save()

    def counted() -> bool:
        with connection.cursor() as cursor:  # this backend's counts, reported at once
            cursor.execute("SELECT pg_stat_force_next_flush()")
        return views.listing_changes() >= before + 2

    wait_until(counted, 5, "the listings' insert and update counted")


@pytest.fixture
def statements() -> Iterator[list[str]]:
    """Every statement this connection sends while the test runs."""
    sent: list[str] = []

    def record(execute: Callable[..., Any], sql: str, *args: Any) -> Any:
        sent.append(" ".join(sql.split()))
        return execute(sql, *args)

    with connection.execute_wrapper(record):
        yield sent


@pytest.mark.django_db
def test_a_refresh_leaves_postgres_parallel_workers_out(statements: list[str]) -> None:
    views.refresh(vocabulary.VIEWS)
    refreshes = [n for n, sql in enumerate(statements) if sql.startswith("REFRESH")]
    assert len(refreshes) == len(vocabulary.VIEWS)
    # In the refreshes' own transaction (a savepoint within the test's).
    assert "SET LOCAL max_parallel_workers_per_gather = 0" in statements[: refreshes[0]]
