"""What the search page's templates get: the form as filled in, a results section (the
lexical preview or the final answer), the states around them (400, 503). Plain functions of
the request and the search's values, so the page's view (retrieval/web/page.py) only decides
what to send when.

Times and provenance are written by retrieval.presentation, as the API writes them."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.http import HttpRequest
from django.utils import timezone

from retrieval import search as searching
from retrieval.pg.facets import Count, Facets
from retrieval.pg.hydrate import ListingView
from retrieval.query.parse import BadQueryError
from retrieval.types import Query, SearchOutcome
from retrieval.web import api

# The page's filters, as the API takes them (value, label); the first `when` is the default.
WHEN_CHOICES = [
    ("upcoming", "Upcoming"),
    ("today", "Today"),
    ("this-weekend", "This weekend"),
    ("next-7-days", "Next 7 days"),
    ("later", "Later"),
    ("past", "Past"),
    ("any", "Any time"),
]
KIND_CHOICES = [("feed", "Feed"), ("calendar", "Calendar"), ("editorial", "Editorial")]
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
class ShownListing:
    """One listing as the page writes it."""

    listing: ListingView
    when: str  # for people, in the listing's own zone
    when_iso: str  # the same instant for machines (<time datetime>), or ""
    provenance: str  # "from Barbican calendar · Time Out feed", or ""
    matched: str  # the stages that found it, space-separated (for tests and styling)
    later: tuple[searching.Dated, ...] = ()  # a series' further dates it carries
    unlisted: int = 0  # and how many more it has in the window than those


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
        # By date or by relevance: links that keep the rest of the search, page 1.
        "sort": "date" if params.get("sort") == "date" else "relevance",
        "sort_urls": {
            "relevance": _url(request, sort=None, page=None),
            "date": _url(request, sort="date", page=None),
        },
    }


def error_context(exc: BadQueryError) -> dict[str, Any]:
    return {"error": str(exc), "error_field": FIELD_OF_PARAMETER.get(exc.parameter, "")}


def results_context(request: HttpRequest, query: Query, shown: "searching.Shown") -> dict[str, Any]:
    """The final answer's section."""
    context = _section(
        request,
        query,
        shown.outcome,
        shown.listings,
        section="final",
        unfinished=False,
        next_page=shown.next_page,
    )
    if shown.facets is not None:
        context["facets"] = _facet_links(request, query, shown.facets)
    return context


def preview_context(
    request: HttpRequest, query: Query, listings: list[ListingView], *, unfinished: bool = False
) -> dict[str, Any]:
    """The lexical preview's section; `unfinished`, it stands as the final one (the search
    failed after the preview was sent)."""
    return _section(
        request,
        query,
        None,
        listings,
        section="final" if unfinished else "preview",
        unfinished=unfinished,
        next_page=None,
    )


def _section(
    request: HttpRequest,
    query: Query,
    outcome: SearchOutcome | None,
    listings: list[ListingView],
    *,
    section: str,
    unfinished: bool,
    next_page: int | None,
) -> dict[str, Any]:
    matched = outcome.matched if outcome is not None else {}
    now = timezone.now()
    shown = [_shown(view, matched.get(view.id, {"lexical"}), now) for view in listings]
    degraded = unfinished or (outcome is not None and outcome.degraded)
    suggestion = outcome.suggestion if outcome is not None else None
    return {
        "section": section,
        "mode": outcome.mode if outcome is not None else "preview",
        "results": shown,
        "degraded": degraded,
        "unfinished": unfinished,
        "suggestion": suggestion,
        "suggestion_url": _url(request, q=suggestion, page=None) if suggestion else "",
        "any_time_url": _url(request, when=None, **{"from": None, "to": None}),
        "next_url": _url(request, page=str(next_page)) if next_page else "",
        "announce": _announcement(len(shown), degraded),
    }


def unanswered_context() -> dict[str, Any]:
    return {"section": "final", "unavailable": True, "retry_after_s": api.RETRY_AFTER_S}


def _shown(view: ListingView, stages: set[str], now: datetime) -> ShownListing:
    told = searching.described(view, now)
    return ShownListing(
        view,
        told.when,
        told.start or "",
        told.provenance,
        " ".join(sorted(stages)),
        told.later,
        view.more_dates - len(told.later),
    )


def _announcement(count: int, degraded: bool) -> str:
    """What the page's live region says when the final results replace the preview."""
    found = f"{count} listing{'s' if count != 1 else ''}"
    if degraded:
        return (
            f"Results updated: {found}. The full search took too long, so these may be incomplete."
        )
    return f"Results updated: {found}."


@dataclass(frozen=True)
class FacetLink:
    """A choice the page offers beside the results: the search with it, and its count."""

    label: str  # "This weekend (3)"
    url: str
    current: bool  # the search has this choice already


def _facet_links(
    request: HttpRequest, query: Query, facets: Facets
) -> list[tuple[str, list[FacetLink]]]:
    """Each count as a link to the search with that choice instead of its own of the kind
    (the count is what that search gives: retrieval/pg/facets.py)."""
    names = dict(WHEN_CHOICES)
    kinds = dict(KIND_CHOICES)
    when = request.GET.get("when") or ""
    chosen_kinds = set(query.filters.kinds)

    def label(name: str, count: Count) -> str:
        return f"{name} ({count.count}{'+' if count.at_least else ''})"

    no_range = {"from": None, "to": None, "page": None}
    groups = [
        (
            "When",
            [
                FacetLink(
                    label(names[c.value], c),
                    _url(request, when=c.value, **no_range),
                    c.value == when,
                )
                for c in facets.when
            ],
        ),
        (
            "Source",
            [
                FacetLink(
                    label(kinds[c.value], c),
                    _url(request, kind=c.value, page=None),
                    chosen_kinds == {c.value},
                )
                for c in facets.kind
            ],
        ),
        (
            "Venue",
            [
                FacetLink(label(c.value, c), _url(request, venue=c.value, page=None), False)
                for c in facets.venue
            ],
        ),
    ]
    return [(name, links) for name, links in groups if links]


def _url(request: HttpRequest, **changes: str | None) -> str:
    """This search's own URL with `changes` made (None: the parameter dropped)."""
    params = request.GET.copy()
    for name, value in changes.items():
        params.pop(name, None)
        if value is not None:
            params[name] = value
    return f"?{params.urlencode()}"
