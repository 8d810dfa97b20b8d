"""How soon the search page shows results: from the request's start to the first listings
(the preview, or the final results when they come first) and to the final results, with
the vector stage free and stalled; as the HTTP client receives the chunks, and as the
browser parses them. A measurement, printed, not a test:
`MEASURE_PAGE=1 pytest tests/browser/test_page_timings.py -s`. Skipped otherwise."""

import os
import statistics
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.browser.conftest import embeddings_locked
from tests.browser.pages import open_search, search_url
from tests.live_app import LiveApp

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.skipif(not os.environ.get("MEASURE_PAGE"), reason="MEASURE_PAGE unset")
SEARCHES = 20
QUERIES = ["jazz", "organ recital", "bread", "science fair", "blues guitar"]

# When each results section was first in the page, from the navigation's request start.
RECORD_TIMES = """
window.__seen = {};
new MutationObserver(() => {
  const start = performance.getEntriesByType("navigation")[0]?.requestStart ?? 0;
  for (const id of ["preview", "final"]) {
    if (!(id in window.__seen) && document.getElementById(id)) {
      window.__seen[id] = performance.now() - start;
    }
  }
}).observe(document, { childList: true, subtree: true });
"""
Timing = tuple[float, float]  # ms to the first results, ms to the final results


def _over_http(client: httpx.Client, url: str) -> Timing:
    started, first, final = time.monotonic(), None, None
    with client.stream("GET", url) as response:
        for chunk in response.iter_raw():
            elapsed = (time.monotonic() - started) * 1000
            first = first if first is not None else elapsed
            final = elapsed if b'id="final"' in chunk else final
    assert first is not None
    assert final is not None
    return first, final


def _in_browser(page: "Page", url: str) -> Timing:
    page.goto(url)
    seen: dict[str, float] = page.evaluate("window.__seen")
    return min(seen.values()), seen["final"]


def _figures(
    measure: Callable[[str], Timing], stall: Callable[[], AbstractContextManager[object]]
) -> str:
    runs = []
    for number in range(SEARCHES):
        with stall():
            runs.append(measure(QUERIES[number % len(QUERIES)]))
    first, final = zip(*runs, strict=True)
    return (
        f"{statistics.median(first):6.1f} / {max(first):6.1f} | "
        f"{statistics.median(final):6.1f} / {max(final):6.1f}"
    )


def test_time_to_first_and_final_results(
    page: "Page", app: LiveApp, test_database_url: str
) -> None:
    page.add_init_script(RECORD_TIMES)
    for query in QUERIES:  # each query's first embedding is not what is measured
        open_search(page, app.url, q=query)
    stalls: dict[str, Callable[[], AbstractContextManager[object]]] = {
        "free": nullcontext,
        "stalled": lambda: embeddings_locked(test_database_url),
    }
    print("\n             vector stage | first results p50 / max | final results p50 / max")
    with httpx.Client(timeout=10) as client:
        for name, stall in stalls.items():
            http = _figures(lambda q: _over_http(client, search_url(app.url, q=q)), stall)
            print(f"{'HTTP, ' + name:>25} | {http} (ms)")
    for name, stall in stalls.items():
        browser = _figures(lambda q: _in_browser(page, search_url(app.url, q=q)), stall)
        print(f"{'browser, ' + name:>25} | {browser} (ms)")
