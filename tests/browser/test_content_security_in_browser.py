"""The search page and the API docs under their Content-Security-Policy in real Chromium:
nothing they need is refused (a refused inline style or script would be reported as a
securitypolicyviolation event)."""

from typing import TYPE_CHECKING

from tests.browser.pages import search_url
from tests.live_app import LiveApp

if TYPE_CHECKING:
    from playwright.sync_api import Page

RECORD_VIOLATIONS = """
window.__violations = [];
document.addEventListener("securitypolicyviolation",
    (event) => window.__violations.push(event.violatedDirective + " " + event.blockedURI));
"""


def test_the_pages_need_nothing_their_policy_refuses(page: "Page", app: LiveApp) -> None:
    page.add_init_script(RECORD_VIOLATIONS)
    for url in (search_url(app.url, q="jazz"), f"{app.url}/api/docs"):
        response = page.goto(url)
        assert response is not None
        assert "script-src 'self'" in response.headers["content-security-policy"]
        page.wait_for_load_state("load")
        assert page.evaluate("window.__violations") == [], url
