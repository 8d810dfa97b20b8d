"""Real headless Chromium, driven by Playwright, against the live app (tests/live_app.py).

Every test here skips, saying why, on a machine without Playwright or Chromium; the axe-core
checks also without `npm ci`'s node_modules/axe-core. CHROMIUM names another binary."""

import importlib.util
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import psycopg
import pytest

from tests.conftest import wait_until
from tests.live_app import LiveApp, live_app, serving
from tests.search_fixtures import VECTOR_TABLE

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Playwright, ViewportSize

__all__ = ["live_app"]

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path(os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium")
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
DESKTOP: "ViewportSize" = {"width": 1280, "height": 900}
PHONE: "ViewportSize" = {"width": 360, "height": 740}


def _missing() -> str | None:
    if importlib.util.find_spec("playwright") is None:
        return "Playwright is not installed (pip install -r requirements.txt)"
    if not CHROMIUM.exists():
        return f"no Chromium at {CHROMIUM} (apt-get install chromium, or set CHROMIUM)"
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    reason = _missing()
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.path).parents:
            item.add_marker(pytest.mark.slow)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(autouse=True)
def _orm_beside_playwright(monkeypatch: pytest.MonkeyPatch, child_env: dict[str, str]) -> None:
    """Playwright's sync API keeps its event loop marked running in this thread, between
    its calls too, and Django then refuses every ORM call as if made from a coroutine. None
    is: the ORM runs only while Playwright waits for nothing (fixtures, locks, flushes).
    (`child_env` first, so the live app's processes never inherit the switch.)"""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "1")


@pytest.fixture(autouse=True)
def _close_async_connections() -> None:
    """Replaces tests/conftest.py's, which is a coroutine: pytest-asyncio would run it on an
    event loop of its own, and Playwright's sync API keeps one running in this thread. The
    tests here open no connections of the search's own to close (the live app does)."""


@pytest.fixture(scope="package")
def playwright() -> "Iterator[Playwright]":
    # Package scope: Playwright's sync API runs an event loop of its own, which must be
    # gone before the async tests outside this package run theirs.
    from playwright.sync_api import sync_playwright

    with sync_playwright() as running:
        yield running


@pytest.fixture(scope="package")
def browser(playwright: "Playwright") -> "Iterator[Browser]":
    # --no-sandbox: Chromium's sandbox refuses to run as root, as CI does.
    # --lang: date fields take their digits in the UI language's order (mm/dd/yyyy).
    launched = playwright.chromium.launch(
        executable_path=str(CHROMIUM), args=["--no-sandbox", "--lang=en-US"]
    )
    yield launched
    launched.close()


@pytest.fixture
def page(browser: "Browser") -> "Iterator[Page]":
    context = browser.new_context(viewport=DESKTOP, locale="en-US", timezone_id="Europe/London")
    context.set_default_timeout(15_000)
    yield context.new_page()
    context.close()


@pytest.fixture(scope="session")
def axe() -> Path:
    if not AXE.exists():
        pytest.skip(f"axe-core is not installed ({AXE} missing: run `npm ci`)")
    return AXE


@pytest.fixture
def events(transactional_db: None) -> int:
    """The events indexed (tests/browser/listings.py); the active generation's id."""
    from tests.browser.listings import index_events

    return index_events()


def searching(app: LiveApp, generation: int) -> LiveApp:
    """`app`, once it searches `generation`: it looks the active generation up at most once
    a second, so a test's first search could otherwise miss the events."""

    def answers() -> bool:
        try:
            response = httpx.get(f"{app.url}/api/search", params={"q": "jazz"}, timeout=5)
        except httpx.HTTPError:
            return False
        body = response.json() if response.status_code == 200 else {}
        return bool(body.get("index_generation") == generation and body.get("results"))

    wait_until(answers, 30, "the live app to search the events")
    return app


@pytest.fixture(scope="module")
def patient_app(child_env: dict[str, str]) -> Iterator[LiveApp]:
    """The app with a vector budget longer than a browser ever takes to show a page's first
    chunk (Chromium's navigations took 60-100 ms on the loaded development machine, longer
    than the default 40 ms), so that the preview is seen before the final results every
    time; and long enough for a test to free the stalled stage while it waits."""
    budgets = {"SEARCH_DEADLINE_MS": "4000", "SEARCH_VECTOR_BUDGET_MS": "3000"}
    with serving(child_env | budgets) as app:
        yield app


@pytest.fixture
def app(live_app: LiveApp, events: int) -> LiveApp:
    return searching(live_app, events)


@contextmanager
def embeddings_locked(database_url: str) -> Iterator[None]:
    """Another connection holding ACCESS EXCLUSIVE on the embeddings table meanwhile: the
    vector stage waits on it until its budget ends (tests/search_fixtures.py's, for a
    synchronous test)."""
    with psycopg.connect(database_url) as holder:
        holder.execute(f"LOCK TABLE {VECTOR_TABLE} IN ACCESS EXCLUSIVE MODE")
        try:
            yield
        finally:
            holder.rollback()
