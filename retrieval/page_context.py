"""What the search page's templates get: the form as filled in, a results section (the
lexical preview or the final answer), the states around them (400, 503). Plain functions of
the request and the search's values, so the page's view (retrieval/page.py) only decides
what to send when.

`when_text` and `provenance_text` stand in for retrieval.presentation's (listings in their
own zone, provenance from their sources); `_next_url` guesses where the outcome's
`next_page` will say."""

from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest

from retrieval.hydrate import ListingView
from retrieval.query import BadQueryError
from retrieval.types import Query, SearchOutcome
from retrieval.views import RETRY_AFTER_S

# The page's filters, as the API takes them (value, label); the first `when` is the default.
WHEN_CHOICES = [
    ("upcoming", "Upcoming"),
    ("today", "Today"),
    ("this-weekend", "This weekend"),
    ("next-7-days", "Next 7 days"),
    ("past", "Past"),
    ("any", "Any time"),
]
KIND_CHOICES = [("feed", "Feed"), ("calendar", "Calendar"), ("editorial", "Editorial")]
MAX_PAGE = 10
# The form field a 400 names, by the parameter its message is about; the others (k,
# page, timeout_ms) have no field on the page, so only the message shows.
FIELD_OF_PARAMETER = {
    "q": "q",
    "when": "when",
    "from": "from",
    "to": "to",
    "venue": "venue",
    "kind": "kind-feed",
}


@dataclass(frozen=True)
class Shown:
    """One listing as the page writes it."""

    listing: ListingView
    when: str  # for people, in the listing's own zone
    when_iso: str  # the same instant for machines (<time datetime>), or ""
    provenance: str  # "from Barbican calendar · Time Out feed", or ""
    matched: str  # the stages that found it, space-separated (for tests and styling)


def form_context(request: HttpRequest) -> dict[str, Any]:
    """The form as the request filled it in, to be shown again."""
    params = request.GET
    when = params.get("when") or WHEN_CHOICES[0][0]
    kinds = set(params.getlist("kind"))
    return {
        "query": params.get("q", ""),
        "when_choices": [(value, label, value == when) for value, label in WHEN_CHOICES],
        "date_from": params.get("from", ""),
        "date_to": params.get("to", ""),
        "venue": params.get("venue", ""),
        "kind_choices": [(value, label, value in kinds) for value, label in KIND_CHOICES],
    }


def error_context(exc: BadQueryError) -> dict[str, Any]:
    # The contract's BadQueryError names its parameter; q until every parser does.
    parameter = getattr(exc, "parameter", "q")
    return {"error": str(exc), "error_field": FIELD_OF_PARAMETER.get(parameter, "")}


def results_context(
    request: HttpRequest,
    query: Query,
    outcome: SearchOutcome | None,
    listings: list[ListingView],
    *,
    section: str = "final",
    unfinished: bool = False,
) -> dict[str, Any]:
    """A results section: the final answer (`outcome`), or the lexical preview (none)."""
    matched = outcome.matched if outcome is not None else {}
    shown = [_shown(view, matched.get(view.id, {"lexical"})) for view in listings]
    degraded = unfinished or (outcome is not None and outcome.degraded)
    suggestion = getattr(outcome, "suggestion", None)  # the lead's "did you mean"
    return {
        "section": section,
        "mode": outcome.mode if outcome is not None else "preview",
        "results": shown,
        "degraded": degraded,
        "unfinished": unfinished,
        "suggestion": suggestion,
        "suggestion_url": _url(request, q=suggestion, page=None) if suggestion else "",
        "any_time_url": _url(request, when=None, **{"from": None, "to": None}),
        "next_url": _next_url(request, query, listings),
        "announce": _announcement(len(shown), degraded),
    }


def unanswered_context() -> dict[str, Any]:
    return {"section": "final", "unavailable": True, "retry_after_s": RETRY_AFTER_S}


def when_text(view: ListingView) -> tuple[str, str]:
    """(for people, for machines). Until retrieval.presentation's (the listing's own zone,
    all-day events as a date) replaces it: the start as stored, in UTC."""
    start = view.start
    if start is None:
        return "", ""
    return f"{start:%a} {start.day} {start:%b, %H:%M %Z}", start.isoformat()


def provenance_text(view: ListingView) -> str:
    """Until retrieval.presentation's, from the listing's sources, replaces it: none."""
    return ""


def _shown(view: ListingView, stages: set[str]) -> Shown:
    when, when_iso = when_text(view)
    return Shown(view, when, when_iso, provenance_text(view), " ".join(sorted(stages)))


def _announcement(count: int, degraded: bool) -> str:
    """What the page's live region says when the final results replace the preview."""
    found = f"{count} listing{'s' if count != 1 else ''}"
    if degraded:
        return (
            f"Results updated: {found}. The full search took too long, so these may be incomplete."
        )
    return f"Results updated: {found}."


def _page_number(request: HttpRequest) -> int:
    raw = request.GET.get("page", "")
    return int(raw) if raw.isdigit() and 1 <= int(raw) <= MAX_PAGE else 1


def _next_url(request: HttpRequest, query: Query, listings: list[ListingView]) -> str:
    """A link to the next page while there may be more: this page was full. (The lead's
    `next_page` of the outcome replaces the guess.)"""
    page = _page_number(request)
    if len(listings) < query.k or page >= MAX_PAGE:
        return ""
    return _url(request, page=str(page + 1))


def _url(request: HttpRequest, **changes: str | None) -> str:
    """This search's own URL with `changes` made (None: the parameter dropped)."""
    params = request.GET.copy()
    for name, value in changes.items():
        params.pop(name, None)
        if value is not None:
            params[name] = value
    return f"?{params.urlencode()}"
