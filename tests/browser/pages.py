"""What the browser tests (and the screenshots) do on the search page, and what they read
back from it."""

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

if TYPE_CHECKING:
    from playwright.sync_api import Page

# Installed before any of the page's own scripts: a MutationObserver noting each new state
# of the results as the streamed page is parsed (which sections are displayed, the final
# section's mode), so a test reads the whole sequence afterwards instead of catching
# moments as they pass.
RECORD_STATES = """
window.__states = [];
const record = () => {
  // Nothing is drawn before the page's stylesheet applies: no state to record yet.
  if (document.styleSheets.length === 0) return;
  const shown = (id) => {
    const section = document.getElementById(id);
    return section !== null && getComputedStyle(section).display !== "none";
  };
  const final = document.getElementById("final");
  const state = {
    preview: shown("preview"),
    final: shown("final"),
    mode: final ? final.dataset.mode : null,
  };
  const last = window.__states[window.__states.length - 1];
  if ((state.preview || state.final) && JSON.stringify(last) !== JSON.stringify(state)) {
    window.__states.push(state);
  }
};
new MutationObserver(record).observe(document, { childList: true, subtree: true });
window.addEventListener("load", record);
"""


@dataclass(frozen=True)
class Listing:
    title: str
    when: str
    venue: str
    matched: str


def search_url(base: str, **params: str) -> str:
    return f"{base}/?{urlencode(params)}"


def open_search(page: "Page", base: str, wait_until: str = "load", **params: str) -> None:
    """The search page first, then the search, as a visitor comes to it: a browsing
    context's first page waits for a renderer process to start, long enough for a whole
    streamed response to arrive before its first chunk is parsed, and its assets are
    fetched only then (afterwards they come from the cache, as they are immutable)."""
    page.goto(base)
    page.goto(search_url(base, **params), wait_until=wait_until)  # type: ignore[arg-type]  # one of Playwright's literal states


def states(page: "Page") -> list[dict[str, Any]]:
    recorded: list[dict[str, Any]] = page.evaluate("window.__states")
    return recorded


def shown_listings(page: "Page", section: str = "final") -> list[Listing]:
    """The listings of a results section, as displayed."""
    rows: list[dict[str, str]] = page.eval_on_selector_all(
        f"#{section} .listing",
        """items => items.map(item => ({
            title: item.querySelector("h3").innerText,
            when: item.querySelector(".when")?.innerText ?? "",
            venue: item.querySelector(".venue")?.innerText ?? "",
            matched: item.dataset.matched,
        }))""",
    )
    return [Listing(**row) for row in rows]


def serious_violations(page: "Page") -> list[str]:
    """axe-core's serious and critical findings on the page as it is now (axe injected)."""
    found: list[str] = page.evaluate(
        """async () => {
            const results = await axe.run(document);
            return results.violations
                .filter(v => v.impact === "serious" || v.impact === "critical")
                .map(v => `${v.id} (${v.impact}): ${v.nodes.map(n => n.target).join(" | ")}`);
        }"""
    )
    return found


def scrolls_sideways(page: "Page") -> bool:
    return bool(page.evaluate("document.documentElement.scrollWidth > window.innerWidth"))


def log_in_on_the_way_to(page: "Page", url: str, username: str, password: str) -> None:
    """Opens `url`, which sends the browser to the admin's login form; fills it in and
    waits to be sent back."""
    page.goto(url)
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("input[type=submit]")
    page.wait_for_url(url)
