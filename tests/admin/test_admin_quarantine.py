"""The quarantine admin (issue 13, item 5) as an editor uses it: an item's reason, excerpt,
source and poll; an editorial record corrected and retried from its page; items retried in
bulk or dismissed with a note; open items counted per source and reason. Query counts of
its pages pinned with a few hundred items (item 7)."""

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.contenttypes.models import ContentType
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from pytest_django import DjangoAssertNumQueries

from ingestion.models import Listing, Poll, QuarantinedItem, Source
from resilience.redis_clients import get_redis
from tests.admin_pages import EDITORS, OPS, client_of
from tests.factories import source

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:ingestion_quarantineditem_changelist"
UNTITLED = json.dumps({"id": "e-1", "title": ""})


@pytest.fixture
def editor() -> Client:
    return client_of(EDITORS)


@pytest.fixture
def empty_ingestion_queue() -> Iterator[None]:
    """The ingestion queue (on the real broker) empty before the test and after it."""
    redis = get_redis()
    redis.delete("ingestion")
    yield
    redis.delete("ingestion")


def _queued() -> list[tuple[str, str]]:
    """The tasks queued on the ingestion queue, as (task name, arguments)."""
    messages = [json.loads(raw) for raw in get_redis().lrange("ingestion", 0, -1)]
    return [(message["headers"]["task"], message["headers"]["argsrepr"]) for message in messages]


def _editorial() -> Source:
    return source("Listings desk", kind=Source.Kind.EDITORIAL)


def _untitled_record(desk: Source, **fields: Any) -> QuarantinedItem:
    """An editorial record quarantined for its empty title (`fields` instead, if given)."""
    values = {"position": 0, "external_id": "e-1", "reason": "title: required"}
    values |= {"excerpt": UNTITLED, "raw": UNTITLED} | fields
    return QuarantinedItem.objects.create(source=desk, **values)


def _change_url(item: QuarantinedItem) -> str:
    return reverse("admin:ingestion_quarantineditem_change", args=[item.pk])


def _act(client: Client, action: str, items: list[QuarantinedItem], **form: str) -> Any:
    selected = [item.pk for item in items]
    return client.post(
        reverse(CHANGELIST), {"action": action, "_selected_action": selected, **form}
    )


def test_an_items_page_shows_its_reason_excerpt_source_and_poll(editor: Client) -> None:
    feed = source("Courier")
    now = timezone.now()
    poll = Poll.objects.create(source=feed, started_at=now, finished_at=now, status="ok")
    item = QuarantinedItem.objects.create(
        source=feed, poll=poll, position=7, reason="no title", excerpt="<item><link/></item>"
    )
    page = editor.get(_change_url(item)).content.decode()
    assert "no title" in page
    assert "&lt;item&gt;&lt;link/&gt;&lt;/item&gt;" in page
    assert reverse("admin:ingestion_source_change", args=[feed.pk]) in page
    assert reverse("admin:ingestion_poll_change", args=[poll.pk]) in page


def test_an_editor_corrects_an_editorial_record_and_retries_it(editor: Client) -> None:
    item = _untitled_record(_editorial())
    assert 'name="_retry"' in editor.get(_change_url(item)).content.decode()
    corrected = json.dumps({"id": "e-1", "title": "Organ recital"})
    response = editor.post(_change_url(item), {"raw": corrected, "_retry": "Save and retry"})
    assert response.status_code == 302
    item.refresh_from_db()
    assert item.resolved_at is not None
    assert Listing.objects.get().title == "Organ recital"


def test_a_retried_record_still_wrong_stays_open_with_the_new_reason(editor: Client) -> None:
    item = _untitled_record(_editorial())
    still_wrong = json.dumps({"id": "e-1", "title": "Organ recital", "url": "ftp://x"})
    editor.post(_change_url(item), {"raw": still_wrong, "_retry": "Save and retry"})
    item.refresh_from_db()
    assert (item.resolved_at, item.raw) == (None, still_wrong)
    assert "url" in item.reason
    assert not Listing.objects.exists()


def test_only_an_open_editorial_record_offers_edit_and_retry(editor: Client) -> None:
    feed_item = QuarantinedItem.objects.create(source=source(), reason="no title")
    resolved = _untitled_record(_editorial(), resolved_at=timezone.now())
    open_record = _untitled_record(Source.objects.get(kind=Source.Kind.EDITORIAL))
    for item in (feed_item, resolved):
        assert 'name="_retry"' not in editor.get(_change_url(item)).content.decode()
    ops_page = client_of(OPS).get(_change_url(open_record)).content.decode()
    assert 'name="_retry"' not in ops_page
    assert 'name="raw"' not in ops_page


def test_dismissing_asks_for_a_note_and_keeps_it(editor: Client) -> None:
    item = QuarantinedItem.objects.create(source=source(), reason="no title")
    retried = _untitled_record(_editorial(), resolved_at=timezone.now())
    asked = _act(editor, "dismiss", [item])
    assert asked.status_code == 200
    assert "no title" in asked.content.decode()
    assert "This field is required" not in asked.content.decode()  # asked, not scolded
    assert _act(editor, "dismiss", [item], confirmed="yes", note="").status_code == 200
    item.refresh_from_db()
    assert item.resolved_at is None

    note = "The feed's test entry; the publisher knows."
    assert _act(editor, "dismiss", [item], confirmed="yes", note=note).status_code == 302
    item.refresh_from_db()
    assert item.resolved_at is not None
    assert item.dismissal_note == note
    dismissed = editor.get(reverse(CHANGELIST), {"state": "dismissed"})
    assert list(dismissed.context["cl"].result_list) == [item]  # not the one retried
    resolved = editor.get(reverse(CHANGELIST), {"state": "resolved"})
    assert list(resolved.context["cl"].result_list) == [retried]


@pytest.mark.usefixtures("empty_ingestion_queue")
def test_bulk_retry_polls_each_source_once_and_applies_editorial_records(editor: Client) -> None:
    feed = source("Courier")
    items = [QuarantinedItem.objects.create(source=feed, reason="no title") for _ in range(3)]
    dismissed = QuarantinedItem.objects.create(
        source=source("Blue Note"), reason="x", resolved_at=timezone.now(), dismissal_note="y"
    )
    record = _untitled_record(_editorial(), raw=json.dumps({"id": "e-1", "title": "Jazz brunch"}))
    response = _act(editor, "retry", [*items, dismissed, record])
    assert response.status_code == 302
    assert _queued() == [("ingestion.tasks.poll_source", f"({feed.pk},)")]
    assert all(item.retry_requested_at for item in QuarantinedItem.objects.filter(source=feed))
    record.refresh_from_db()
    assert record.resolved_at is not None
    assert Listing.objects.get().title == "Jazz brunch"


def test_it_counts_open_items_per_source_and_reason(editor: Client) -> None:
    courier, blue_note = source("Courier"), source("Blue Note")
    for where, reason, count in [(courier, "no title", 3), (courier, "bad date", 1)]:
        for _ in range(count):
            QuarantinedItem.objects.create(source=where, reason=reason)
    for _ in range(2):
        QuarantinedItem.objects.create(source=blue_note, reason="no title")
    QuarantinedItem.objects.create(source=courier, reason="no title", resolved_at=timezone.now())
    response = editor.get(reverse(CHANGELIST))
    counts = [
        (row["source__name"], row["reason"], row["items"]) for row in response.context["counts"]
    ]
    assert counts == [
        ("Courier", "no title", 3),
        ("Blue Note", "no title", 2),
        ("Courier", "bad date", 1),
    ]
    assert "Open items by source and reason" in response.content.decode()


def _many_items(count: int) -> list[QuarantinedItem]:
    sources = [source(f"Feed {n}") for n in range(5)]
    now = timezone.now()
    polls = Poll.objects.bulk_create(
        Poll(source=feed, started_at=now, finished_at=now, status="ok") for feed in sources
    )
    return QuarantinedItem.objects.bulk_create(
        QuarantinedItem(
            source=sources[n % 5], poll=polls[n % 5], position=n, reason=f"reason {n % 7}"
        )
        for n in range(count)
    )


def test_the_changelist_is_a_fixed_number_of_queries(
    editor: Client, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    _many_items(300)
    # The user and their permissions (two), the counts per source and reason, the two
    # counts of the list, the page with its sources, the source filter's choices.
    with django_assert_num_queries(8):
        response = editor.get(reverse(CHANGELIST))
    assert len(response.context["cl"].result_list) == 100


def test_an_items_change_page_is_a_fixed_number_of_queries(
    editor: Client, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    item = _many_items(300)[0]
    ContentType.objects.clear_cache()  # counted the same whichever tests ran before
    # The user, the item, the permissions (two), its content type, its source and poll.
    with django_assert_num_queries(7):
        response = editor.get(_change_url(item))
    assert response.status_code == 200
