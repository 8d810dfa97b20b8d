"""The sources admin in real Chromium, against the live app: a superuser logs in through
the admin's form, finds a failing feed's open breaker in the list and only it behind the
failing sources filter; axe-core finds nothing serious or critical on the list or on a
source's page, at desktop and phone width. With SCREENSHOTS_DIR set, also
docs/img/admin-sources.png and docs/img/admin-sources-phone.png."""

import os
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from django.utils import timezone

from ingestion.models import Poll, Source
from tests import ops_personas
from tests.admin.test_admin_sources import break_down
from tests.browser.conftest import DESKTOP, PHONE
from tests.browser.pages import log_in_to
from tests.live_app import LiveApp

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, ViewportSize

LIST = "/admin/ingestion/source/"
FAILING = "Riverside Arts Centre"
# axe-core's serious and critical findings; minor and moderate ones are Django admin's
# own markup's business (none of this page's).
SERIOUS = """async () => {
    const results = await axe.run(document);
    return results.violations
        .filter(v => v.impact === "serious" || v.impact === "critical")
        .map(v => `${v.id} (${v.impact}): ${v.nodes.map(n => n.target).join(" | ")}`);
}"""


def _polls(source: Source, statuses: list[str], **counts: int) -> None:
    now = timezone.now()
    Poll.objects.bulk_create(
        Poll(
            source=source,
            started_at=now - timedelta(minutes=15 * age),
            finished_at=now - timedelta(minutes=15 * age),
            status=status,
            error="HTTP 503 Service Unavailable" if status == Poll.Status.FAILED else "",
            **(counts if status == Poll.Status.OK else {}),
        )
        for age, status in enumerate(statuses)
    )


@pytest.fixture
def sources(transactional_db: None) -> Source:
    """A feed, a calendar, an editorial desk and a failing feed with its breaker open, as
    a small site has them; the failing one."""
    now = timezone.now()
    ok = {"last_success_at": now - timedelta(minutes=4)}
    courier = Source.objects.create(
        name="The Courier: what's on", kind=Source.Kind.FEED, url="https://example.org/rss", **ok
    )
    _polls(courier, [Poll.Status.OK, Poll.Status.NOT_MODIFIED], items=42, new=3, unchanged=39)
    hall = Source.objects.create(
        name="Harbour Hall calendar",
        kind=Source.Kind.CALENDAR,
        url="https://example.org/hall.ics",
        **ok,
    )
    _polls(hall, [Poll.Status.OK], items=118, updated=2, unchanged=115, withdrawn=1)
    Source.objects.create(name="Listings desk", kind=Source.Kind.EDITORIAL)
    failing = Source.objects.create(
        name=FAILING, kind=Source.Kind.FEED, url="https://example.org/riverside.xml"
    )
    break_down(failing, "HTTP 503 Service Unavailable", last_success=timedelta(hours=5))
    _polls(failing, [Poll.Status.SKIPPED, Poll.Status.FAILED, Poll.Status.FAILED, Poll.Status.OK])
    return failing


@pytest.fixture
def superuser(transactional_db: None) -> str:
    return ops_personas.superuser().username


def _log_in(page: "Page", app: LiveApp, username: str) -> None:
    log_in_to(page, f"{app.url}{LIST}", username, ops_personas.PASSWORD)


def _names(page: "Page") -> list[str]:
    return page.locator("#result_list tbody th a").all_inner_texts()


def test_the_list_shows_the_open_breaker_and_filters_the_failing_source(
    page: "Page", live_app: LiveApp, sources: Source, superuser: str
) -> None:
    _log_in(page, live_app, superuser)
    row = page.locator("#result_list tbody tr", has_text=FAILING)
    assert row.locator("td.field-breaker_state").inner_text() == "open"
    assert row.locator("td.field-last_poll").inner_text() == "Skipped (breaker open)"
    assert len(_names(page)) == 4
    page.get_by_role("link", name="Failing sources").click()
    page.wait_for_url("**health=failing**")
    assert _names(page) == [FAILING]


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_axe_finds_nothing_serious_on_the_list_or_a_source_s_page(
    axe: Path,
    browser: "Browser",
    live_app: LiveApp,
    sources: Source,
    superuser: str,
    viewport: "ViewportSize",
) -> None:
    context = browser.new_context(viewport=viewport)
    try:
        page = context.new_page()
        _log_in(page, live_app, superuser)
        for url in (LIST, f"{LIST}{sources.pk}/change/"):
            page.goto(f"{live_app.url}{url}")
            page.add_script_tag(path=str(axe))
            assert page.evaluate(SERIOUS) == [], url
    finally:
        context.close()


@pytest.mark.skipif(not os.environ.get("SCREENSHOTS_DIR"), reason="SCREENSHOTS_DIR is not set")
def test_take_the_sources_list_s_screenshots(
    browser: "Browser", live_app: LiveApp, sources: Source, superuser: str
) -> None:
    out = Path(os.environ["SCREENSHOTS_DIR"])
    shots: list[tuple[str, ViewportSize]] = [
        ("admin-sources", DESKTOP),
        ("admin-sources-phone", PHONE),
    ]
    for name, viewport in shots:
        context = browser.new_context(viewport=viewport, device_scale_factor=1)
        try:
            page = context.new_page()
            _log_in(page, live_app, superuser)
            if viewport == DESKTOP:  # the navigation folded away, for the list's columns
                page.click("#toggle-nav-sidebar")
            page.screenshot(path=str(out / f"{name}.png"), full_page=True)
            if viewport == DESKTOP:  # back for the entry pages, which want the navigation
                page.click("#toggle-nav-sidebar")
            _take_the_editorial_entry_s(page, live_app, out, name.replace("sources", "editorial"))
        finally:
            context.close()


# Two records of an upload, the second without the title every record needs.
UPLOAD = "id,title,venue\nd-1,Harbour walk at dawn,Quay steps\nd-2,,Quay steps\n"


def _take_the_editorial_entry_s(page: "Page", app: LiveApp, out: Path, name: str) -> None:
    """The editorial desk's record form, then an upload's result with its refused row."""
    desk = Source.objects.get(name="Listings desk")
    base = f"{app.url}{LIST}{desk.pk}"
    page.goto(f"{base}/records/add/")
    page.screenshot(path=str(out / f"{name}-record.png"), full_page=True)
    page.goto(f"{base}/upload/")
    page.set_input_files(
        "input[type=file]",
        {"name": "desk.csv", "mimeType": "text/csv", "buffer": UPLOAD.encode()},
    )
    page.click("input[type=submit]")
    page.wait_for_load_state()
    page.screenshot(path=str(out / f"{name}-upload.png"), full_page=True)
