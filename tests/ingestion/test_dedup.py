"""Undated items de-duplicate on their stored normalised title; dated ones keep their rule;
a batch de-duplicates as its drafts would one at a time."""

from datetime import timedelta

import pytest
from django.utils import timezone

from ingestion.batches import apply_parse_result
from ingestion.drafts import ParseResult
from ingestion.models import Listing
from ingestion.upsert import Outcome, apply_draft
from tests.factories import CONCERT_START, draft, source

pytestmark = pytest.mark.django_db
NOW = timezone.now()


def test_undated_items_differing_in_punctuation_accents_or_case_are_one_listing() -> None:
    feed, calendar, desk = (
        source("Feed"),
        source("Calendar", "calendar"),
        source("Desk", "editorial"),
    )
    apply_draft(feed, draft("f1", title="Café Oto: late-night jazz!", starts_at=None), NOW)
    outcomes = [
        apply_draft(calendar, draft("c1", title="cafe oto late night jazz", starts_at=None), NOW),
        apply_draft(desk, draft("e1", title="  CAFÉ OTO — Late Night Jazz ", starts_at=None), NOW),
    ]
    assert outcomes == [Outcome.UPDATED, Outcome.UPDATED]
    listing = Listing.objects.get()
    assert listing.records.count() == 3
    assert listing.normalised_title == "cafe oto late night jazz"


def test_undated_items_differing_in_a_word_stay_apart() -> None:
    feed, desk = source("Feed"), source("Desk", "editorial")
    apply_draft(feed, draft("f1", title="Café Oto: late-night jazz", starts_at=None), NOW)
    assert apply_draft(
        desk, draft("e1", title="Café Oto: late-night folk", starts_at=None), NOW
    ) == (Outcome.NEW)
    # Folding punctuation away must not join words either.
    assert apply_draft(
        desk, draft("e2", title="Café Oto: latenight jazz", starts_at=None), NOW
    ) == (Outcome.NEW)
    assert Listing.objects.count() == 3


def test_titles_of_punctuation_only_do_not_match_each_other() -> None:
    feed, desk = source("Feed"), source("Desk", "editorial")
    apply_draft(feed, draft("f1", title="!!!", starts_at=None), NOW)
    assert apply_draft(desk, draft("e1", title="???", starts_at=None), NOW) == Outcome.NEW


def test_undated_items_at_contradicting_venues_stay_apart() -> None:
    feed, desk = source("Feed"), source("Desk", "editorial")
    apply_draft(feed, draft("f1", title="Open day", venue="Crypt", starts_at=None), NOW)
    other = draft("e1", title="Open Day!", venue="Royal Albert Hall", starts_at=None)
    assert apply_draft(desk, other, NOW) == Outcome.NEW


def test_dated_items_keep_their_rule() -> None:
    feed, calendar = source("Feed"), source("Calendar", "calendar")
    apply_draft(feed, draft("f1", title="Café Oto: late-night jazz"), NOW)
    # The same title a week later is another event; an undated one is not the dated one.
    later = draft(
        "c1", title="cafe oto late night jazz", starts_at=CONCERT_START + timedelta(days=7)
    )
    assert apply_draft(calendar, later, NOW) == Outcome.NEW
    undated = draft("c2", title="cafe oto late night jazz", starts_at=None)
    assert apply_draft(calendar, undated, NOW) == Outcome.NEW
    # Within the tolerance a spelling variant still joins, by trigram similarity.
    close = draft(
        "c3", title="Cafe Otto late nite jazz", starts_at=CONCERT_START + timedelta(minutes=10)
    )
    assert apply_draft(calendar, close, NOW) == Outcome.UPDATED
    assert Listing.objects.count() == 3


def test_a_title_changed_outside_ingestion_is_renormalised() -> None:
    apply_draft(source(), draft(title="Old title", starts_at=None), NOW)
    Listing.objects.update(title="Nouvelle Vague: Ciné-club")
    assert Listing.objects.get().normalised_title == "nouvelle vague cine club"


def test_two_drafts_of_one_batch_never_take_the_same_listing() -> None:
    feed, desk = source("Feed"), source("Desk", "editorial")
    apply_draft(feed, draft("f1", title="Museum late", starts_at=None), NOW)
    result = ParseResult(
        drafts=[
            draft("e1", title="Museum Late", starts_at=None, position=0),
            draft("e2", title="museum late!", starts_at=None, position=1),
        ]
    )
    poll = apply_parse_result(desk, result, fetched_at=NOW, started_at=NOW)
    assert (poll.updated, poll.new) == (1, 1)
    merged = Listing.objects.get(records__external_id="f1")
    assert set(merged.records.values_list("external_id", flat=True)) == {"f1", "e1"}


def test_a_batch_lands_as_its_drafts_would_one_at_a_time() -> None:
    """New, merged, changed, unchanged, withdrawn and a repeated id in one batch."""
    feed, calendar = source("Feed"), source("Calendar", "calendar")
    apply_draft(feed, draft("f1"), NOW)
    apply_draft(calendar, draft("c-old", title="Comedy night", starts_at=None), NOW)
    apply_draft(calendar, draft("c-gone", title="Poetry slam", starts_at=None), NOW)
    result = ParseResult(
        drafts=[
            draft("c-new", title="Organ recital", starts_at=None, position=0),
            draft("c-dup", title="Nina Simone Tribute!", position=1),
            draft(
                "c-old", title="Comedy night", description="Now later.", starts_at=None, position=2
            ),
            draft("c-gone", title="Poetry slam", starts_at=None, withdrawn=True, position=3),
            draft("c-new", title="Organ recital", description="Bach.", starts_at=None, position=4),
        ]
    )
    poll = apply_parse_result(calendar, result, fetched_at=NOW, started_at=NOW)
    assert (poll.new, poll.updated, poll.withdrawn) == (1, 3, 1)
    assert Listing.objects.get(title="Organ recital").description == "Bach."
    assert Listing.objects.get(title="Organ recital").content_version == 2
    assert Listing.objects.get(records__external_id="f1").records.count() == 2
    comedy = Listing.objects.get(title="Comedy night")
    assert (comedy.description, comedy.content_version) == ("Now later.", 2)
    assert Listing.objects.get(title="Poetry slam").status == Listing.Status.WITHDRAWN
    again = apply_parse_result(calendar, result, fetched_at=NOW, started_at=NOW)
    assert (again.unchanged, again.new, again.updated) == (3, 0, 2)  # c-new twice, in turn
