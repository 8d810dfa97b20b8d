"""How soon the search page shows results at 100,000 listings: from the request's start to
the first listings (the lexical preview, or the final results when they come first) and to
the final results, with the vector stage free and stalled (the embeddings table locked by
another connection, so the vector stage waits out its budget); as an HTTP client receives
the streamed chunks, and as headless Chromium parses them.

    .venv/bin/python bench/page_timings.py --data-dir /tmp/bench100k

The database is bench/search.py's (built with --data-dir). With --url, the page of a stack
already serving that database on loopback is measured instead of a web server started
here. Chromium is Debian's (`CHROMIUM` names another binary), driven by Playwright."""

import argparse
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlencode

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import REPO, running

sys.path.insert(0, str(REPO))  # openloop's loopback guard is the sweep's (evaluation/)
from capacity import query_pool
from stack import add_stack_arguments, prepare, serve

if TYPE_CHECKING:
    from playwright.sync_api import Page

CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
QUERIES = 5  # distinct queries, cycled; each one's first embedding is not measured
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
    if first is None or final is None:
        raise RuntimeError(f"no results section in {url}")
    return first, final


def _in_browser(page: "Page", url: str) -> Timing:
    page.goto(url)
    seen: dict[str, float] = page.evaluate("window.__seen")
    return min(seen.values()), seen["final"]


@contextmanager
def _embeddings_locked(conninfo: str) -> Iterator[None]:
    with psycopg.connect(conninfo) as holder:
        holder.execute("LOCK TABLE ingestion_listing_embedding IN ACCESS EXCLUSIVE MODE")
        try:
            yield
        finally:
            holder.rollback()


def _figures(
    searches: int,
    queries: list[str],
    measure: Callable[[str], Timing],
    stall: Callable[[], AbstractContextManager[object]],
) -> str:
    runs = []
    for number in range(searches):
        with stall():
            runs.append(measure(queries[number % len(queries)]))
    first, final = zip(*runs, strict=True)
    return (
        f"{statistics.median(first):6.1f} / {max(first):6.1f} | "
        f"{statistics.median(final):6.1f} / {max(final):6.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_stack_arguments(parser)
    parser.add_argument("--searches", type=int, default=20, help="per row")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with running(args.data_dir), ExitStack() as stack:
        from retrieval.pg.pool import conninfo

        postmaster = prepare(args.data_dir)
        base_url, _ = serve(stack, args.url, args.data_dir / "page-web.log", postmaster)
        queries = query_pool(QUERIES)
        stalls: dict[str, Callable[[], AbstractContextManager[object]]] = {
            "free": nullcontext,
            "stalled": lambda: _embeddings_locked(conninfo()),
        }

        def url(q: str) -> str:
            return f"{base_url}/?{urlencode({'q': q})}"

        print("\n             vector stage | first results p50 / max | final results p50 / max")
        with httpx.Client(timeout=10) as client:
            for q in queries:  # each query's first embedding is not what is measured
                _over_http(client, url(q))
            for name, stall in stalls.items():
                http = _figures(args.searches, queries, lambda q: _over_http(client, url(q)), stall)
                print(f"{'HTTP, ' + name:>25} | {http} (ms)")
        with sync_playwright() as playwright:
            # --no-sandbox: Chromium's sandbox refuses to run as root.
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_page()
            page.add_init_script(RECORD_TIMES)
            page.goto(base_url)  # the renderer started and the assets cached, as for a visitor
            for name, stall in stalls.items():
                measured = _figures(
                    args.searches, queries, lambda q: _in_browser(page, url(q)), stall
                )
                print(f"{'browser, ' + name:>25} | {measured} (ms)")
            browser.close()


if __name__ == "__main__":
    main()
