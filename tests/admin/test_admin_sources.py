"""The sources admin (issue 13, item 4) as an editor uses it: pausing and resuming (the
scheduler skips a paused source), polling now, a source's health (breaker, last errors,
last success, time since it, latest polls with their counts), the failing sources filter;
ops may look but not act. Both pages' query counts are pinned with a few hundred rows
(item 7)."""

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from pytest_django import DjangoAssertNumQueries

from ingestion.models import Poll, Source
from ingestion.scheduling import claim_due_sources
from tests.admin.test_admin_quarantine import _queued as queued
from tests.admin.test_admin_quarantine import empty_ingestion_queue
from tests.admin_pages import EDITORS, OPS, client_of
from tests.factories import source

__all__ = ["empty_ingestion_queue"]  # a fixture, used by name

pytestmark = pytest.mark.django_db
CHANGELIST = "admin:ingestion_source_changelist"


@pytest.fixture
def editor() -> Client:
    return client_of(EDITORS)


def _change_url(source: Source) -> str:
    return reverse("admin:ingestion_source_change", args=[source.pk])


def _control(client: Client, source: Source, what: str) -> int:
    """A change page's button pressed: the response's status."""
    response = client.post(reverse(f"admin:ingestion_source_{what}", args=[source.pk]))
    return response.status_code


def _poll(source: Source, status: str, minutes_ago: float, **fields: object) -> Poll:
    at = timezone.now() - timedelta(minutes=minutes_ago)
    return Poll.objects.create(
        source=source, started_at=at, finished_at=at, status=status, **fields
    )


def break_down(source: Source, error: str, *, last_success: timedelta) -> None:
    """`source` failing with a transient `error` five minutes ago, which opened its
    breaker; its last success `last_success` ago."""
    now = timezone.now()
    Source.objects.filter(pk=source.pk).update(
        breaker_state="open",
        breaker_opened_at=now - timedelta(minutes=5),
        last_success_at=now - last_success,
        last_error=error,
        last_error_permanent=False,
        last_error_at=now - timedelta(minutes=5),
    )


def _shown(client: Client, **params: str) -> set[str]:
    response = client.get(reverse(CHANGELIST), params)
    assert response.status_code == 200
    return {shown.name for shown in response.context["cl"].result_list}


def test_a_paused_source_is_not_polled_until_it_is_resumed(editor: Client) -> None:
    feed = source("Courier")
    assert _control(editor, feed, "pause") == 302
    assert claim_due_sources() == []
    page = editor.get(_change_url(feed)).content.decode()
    assert "Resume polling" in page
    assert "Pause polling" not in page
    Source.objects.filter(pk=feed.pk).update(next_poll_at=timezone.now() + timedelta(hours=1))
    assert _control(editor, feed, "resume") == 302
    assert claim_due_sources() == [feed.pk]  # due at once, not at the end of its interval


def test_pausing_and_resuming_as_actions(editor: Client) -> None:
    feeds = [source("Courier"), source("Gazette")]
    selected = [feed.pk for feed in feeds]
    editor.post(reverse(CHANGELIST), {"action": "pause_sources", "_selected_action": selected})
    assert claim_due_sources() == []
    editor.post(reverse(CHANGELIST), {"action": "resume_sources", "_selected_action": selected})
    assert claim_due_sources() == sorted(selected)


@pytest.mark.usefixtures("empty_ingestion_queue")
def test_poll_now_queues_a_forced_poll(editor: Client) -> None:
    feed = source("Courier")
    assert _control(editor, feed, "poll") == 302
    assert queued() == [("ingestion.tasks.poll_source", f"({feed.pk},)")]
    messages = [str(message) for message in editor.get(_change_url(feed)).context["messages"]]
    assert messages == ["Poll queued."]


@pytest.mark.usefixtures("empty_ingestion_queue")
def test_poll_now_as_an_action_skips_a_source_with_nothing_to_poll(editor: Client) -> None:
    feed = source("Courier")
    desk = Source.objects.create(name="Listings desk", kind=Source.Kind.EDITORIAL)
    selected = [feed.pk, desk.pk]
    editor.post(reverse(CHANGELIST), {"action": "poll_sources_now", "_selected_action": selected})
    assert queued() == [("ingestion.tasks.poll_source", f"({feed.pk},)")]


def test_the_buttons_take_a_post_only(editor: Client) -> None:
    feed = source("Courier")
    assert editor.get(reverse("admin:ingestion_source_pause", args=[feed.pk])).status_code == 405
    feed.refresh_from_db()
    assert feed.active


@pytest.mark.usefixtures("empty_ingestion_queue")
@pytest.mark.parametrize("what", ["pause", "resume", "poll"])
def test_ops_may_not_pause_resume_or_poll(what: str) -> None:
    feed = source("Courier")
    Source.objects.filter(pk=feed.pk).update(active=what != "resume")
    ops = client_of(OPS)
    assert _control(ops, feed, what) == 403
    feed.refresh_from_db()
    assert feed.active is (what != "resume")
    assert queued() == []
    assert "Poll now" not in ops.get(_change_url(feed)).content.decode()


def test_the_failing_filter_lists_exactly_the_failing_sources(editor: Client) -> None:
    for name, state in [("Open breaker", "open"), ("Half open", "half_open")]:
        Source.objects.filter(pk=source(name).pk).update(breaker_state=state)
    _poll(source("Fetch failed"), Poll.Status.FAILED, 1, error="connection refused")
    _poll(source("Payload rejected"), Poll.Status.REJECTED, 1, error="not XML")
    recovered = source("Recovered")
    _poll(recovered, Poll.Status.FAILED, 10, error="timed out")
    _poll(recovered, Poll.Status.OK, 1)
    paused = source("Paused, open breaker")
    Source.objects.filter(pk=paused.pk).update(active=False, breaker_state="open")
    source("Never polled")
    assert _shown(editor, health="failing") == {
        "Open breaker",
        "Half open",
        "Fetch failed",
        "Payload rejected",
    }
    assert len(_shown(editor)) == 7


def test_the_list_shows_each_source_s_last_poll_and_time_since_its_last_success(
    editor: Client,
) -> None:
    feed = source("Courier")
    Source.objects.filter(pk=feed.pk).update(last_success_at=timezone.now() - timedelta(hours=3))
    _poll(feed, Poll.Status.FAILED, 1, error="connection refused")
    source("Gazette")
    page = editor.get(reverse(CHANGELIST)).content.decode()
    assert "Fetch failed" in page
    assert "3\xa0hours" in page
    assert "none yet" in page
    assert "never" in page


def test_a_source_s_page_shows_its_health_and_latest_polls_with_their_counts(
    editor: Client,
) -> None:
    feed = source("Courier")
    break_down(feed, "HTTP 503 from the publisher", last_success=timedelta(hours=2))
    _poll(feed, Poll.Status.REJECTED, 60, items=1, quarantined=1, error="not XML at line 1")
    for minutes_ago in range(1, 12):
        _poll(feed, Poll.Status.SKIPPED, minutes_ago, error="circuit breaker open")
    _poll(feed, Poll.Status.OK, 0.5, items=9, new=4, updated=3, unchanged=1, quarantined=1)
    page = editor.get(_change_url(feed)).content.decode()
    assert '<div class="readonly">open</div>' in page
    assert "2\xa0hours" in page
    assert "HTTP 503 from the publisher" in page
    assert "(transient)" in page
    assert "not XML at line 1" in page  # a failed poll's error, beyond the latest ten
    polls = _polls_table(page)
    assert polls.count("<tr>") == 1 + 10  # its header, and the latest ten polls only
    assert polls.count("Skipped (breaker open)") == 9
    assert "<td>9</td><td>4</td><td>3</td><td>1</td><td>0</td><td>1</td>" in "".join(polls.split())


def _polls_table(page: str) -> str:
    return page.split('class="source-polls"', 1)[1].split("</table>", 1)[0]


def _many_sources(count: int, polls_each: int) -> list[Source]:
    sources = Source.objects.bulk_create(
        Source(name=f"Feed {number}", kind=Source.Kind.FEED, url=f"/dev/null/{number}")
        for number in range(count)
    )
    now = timezone.now()
    Poll.objects.bulk_create(
        Poll(
            source=feed,
            started_at=now - timedelta(minutes=minutes),
            finished_at=now,
            status=Poll.Status.FAILED if minutes % 3 == 0 else Poll.Status.OK,
            error="timed out" if minutes % 3 == 0 else "",
        )
        for feed in sources
        for minutes in range(polls_each)
    )
    return sources


@pytest.mark.parametrize("params", [{}, {"health": "failing"}, {"q": "feed 1"}])
def test_the_changelist_is_a_fixed_number_of_queries(
    editor: Client, django_assert_num_queries: DjangoAssertNumQueries, params: dict[str, str]
) -> None:
    _many_sources(300, polls_each=3)
    # The user and their permissions (own and group's), the breaker filter's states, the
    # two counts (filtered and all) and the page, each source's last poll and open
    # quarantine within it: none per row.
    with django_assert_num_queries(7):
        response = editor.get(reverse(CHANGELIST), params)
    assert response.status_code == 200
    assert len(response.context["cl"].result_list) == 100  # a full page


def test_a_source_s_change_page_is_a_fixed_number_of_queries(
    editor: Client, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    [feed] = _many_sources(1, polls_each=300)
    # The user, the source, the permissions (two), its failed polls and its latest polls.
    with django_assert_num_queries(6):
        response = editor.get(_change_url(feed))
    assert response.status_code == 200
    page = response.content.decode()
    assert page.count("fetch failed: timed out") == 5  # the last errors, FAILED_POLLS_SHOWN
    assert _polls_table(page).count("<tr>") == 1 + 10
