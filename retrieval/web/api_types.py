"""The public search API's contract as types: the request parameters it reads and the
bodies it answers with. The views build their bodies as these TypedDicts and the OpenAPI
document (searchsite/openapi.py) is generated from them, so the schema cannot drift from
what the code returns without a type error or a failing schema test.

Importable without Django: plain types, pydantic annotations only (read when the schema
is built, once per process; nothing here runs per request)."""

from dataclasses import dataclass
from typing import Annotated, Literal, NotRequired

from pydantic import Field, WithJsonSchema

# typing_extensions' TypedDict, not typing's: pydantic reads a TypedDict's fields only
# from the former on Python 3.11.
from typing_extensions import TypedDict

from retrieval.types import Mode, Reason

MAX_QUERY_CHARS = 200
DEFAULT_K = 10
MAX_K = 50
MAX_PAGE = 10
MAX_VENUE_CHARS = 200
MAX_SUGGEST_CHARS = 100
WHEN_VALUES = ("upcoming", "past", "any", "today", "this-weekend", "next-7-days", "later")
DEFAULT_WHEN = "upcoming"
SORTS = ("relevance", "date")
# The relative dates `from` and `to` accept besides a date or a date-time.
DATE_SHORTCUTS = ("today", "this-weekend", "next-7-days")
# Source kinds as ingestion.models.Source.Kind spells them (tests/site/test_openapi.py keeps
# the two equal), written out so that this module needs no Django models.
SourceKind = Literal["feed", "calendar", "editorial"]
SOURCE_KINDS: tuple[SourceKind, ...] = ("feed", "calendar", "editorial")
# "cache": a cache_fallback answer's listing from the cached ranking (retrieval/hybrid.py);
# the schema left it out, and such answers broke their own contract.
Stage = Literal["lexical", "vector", "cache"]

# Text with a character other than white space, and no control character but white space
# (tab to carriage return): what the query parser takes.
_CONTROL = r"\x00-\x08\x0e-\x1f\x7f-\x9f"
QUERY_TEXT = f"^[^{_CONTROL}]*[^\\s{_CONTROL}][^{_CONTROL}]*$"
# What a visitor has typed so far: blank is allowed (and suggested nothing).
TYPED_TEXT = f"^[^{_CONTROL}]*$"
# Decimal digits with an optional fraction: no sign, exponent, inf or nan. A query
# parameter is text, so the schema says which text rather than "number".
MILLISECONDS = r"^[0-9]+(\.[0-9]+)?$"

# An ISO 8601 date-time with its UTC offset, as the view writes it with isoformat().
DateTime = Annotated[str, WithJsonSchema({"type": "string", "format": "date-time"})]


@dataclass(frozen=True)
class Parameter:
    """One request parameter of `GET /api/search` (and of the page `/`): what the schema
    declares and what the parser accepts. `formats` and `enum` together mean "a value of
    any of these formats, or one of these words"."""

    name: str
    description: str
    example: str | int  # a valid value: the docs show it, a test sends it and expects no 400
    type: Literal["string", "integer"] = "string"
    location: Literal["query", "header"] = "query"
    required: bool = False
    repeatable: bool = False  # `kind=feed&kind=calendar`
    enum: tuple[str, ...] = ()
    formats: tuple[str, ...] = ()
    minimum: int | None = None
    maximum: int | None = None
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None  # an ECMA-262 regular expression, as JSON Schema has it
    default: str | int | None = None


def search_parameters(
    *, max_query_chars: int = MAX_QUERY_CHARS, max_k: int = MAX_K, max_page: int = MAX_PAGE
) -> tuple[Parameter, ...]:
    """Every parameter the search reads. The limits settings can change are arguments, so
    a schema built with the site's settings states the limits the site enforces."""
    timeout = (
        "Your own deadline in milliseconds, e.g. 500 or 12.5: the answer comes by then, or a 504"
    )
    date = "a date (YYYY-MM-DD), an ISO 8601 date-time, or one of the shortcuts"
    return (
        Parameter(
            "q",
            "What to search for: words, a quoted phrase, -word to exclude one, `or`.",
            example="jazz",
            required=True,
            min_length=1,
            max_length=max_query_chars,
            pattern=QUERY_TEXT,
        ),
        Parameter(
            "k",
            "How many results a page holds.",
            example=5,
            type="integer",
            minimum=1,
            maximum=max_k,
            default=DEFAULT_K,
        ),
        Parameter(
            "page",
            "Which page of results; the response's `next_page` names the next one.",
            example=2,
            type="integer",
            minimum=1,
            maximum=max_page,
            default=1,
        ),
        Parameter(
            "sort",
            "How the results are ordered: by relevance, or by date (the same matching "
            "listings, sooner first).",
            example="date",
            enum=SORTS,
            default="relevance",
        ),
        Parameter(
            "timeout_ms",
            f"{timeout} (capped by the site).",
            example="500",
            pattern=MILLISECONDS,
        ),
        Parameter(
            "X-Request-Timeout-Ms",
            f"{timeout}. Read when `timeout_ms` is absent.",
            example="500",
            location="header",
            pattern=MILLISECONDS,
        ),
        Parameter(
            "when",
            "Which events: those that have not ended (and undated listings) by default. "
            "Cannot be combined with `from` or `to`.",
            example="this-weekend",
            enum=WHEN_VALUES,
            default=DEFAULT_WHEN,
        ),
        Parameter(
            "from",
            f"Events that end on or after this: {date}, resolved in the site's time zone.",
            example="2026-12-05",
            enum=DATE_SHORTCUTS,
            formats=("date", "date-time"),
        ),
        Parameter(
            "to",
            f"Events that start on or before this: {date}, resolved in the site's time zone.",
            example="next-7-days",
            enum=DATE_SHORTCUTS,
            formats=("date", "date-time"),
        ),
        Parameter(
            "venue",
            "A venue's name or alias, matched ignoring case and accents.",
            example="Barbican",
            max_length=MAX_VENUE_CHARS,
        ),
        Parameter(
            "kind",
            "Only listings from sources of these kinds; repeat it for several.",
            example="calendar",
            repeatable=True,
            enum=SOURCE_KINDS,
        ),
    )


class SourceBody(TypedDict):
    name: Annotated[str, Field(description="The source's name, e.g. 'Barbican'.")]
    kind: SourceKind


class DateBody(TypedDict):
    start: Annotated[DateTime | None, Field(description="In the listing's own time zone.")]
    end: Annotated[DateTime | None, Field(description="As `start`.")]
    when: Annotated[str, Field(description="For people: 'Tue 12 Jan, 19:30-22:30 GMT'.")]


class ResultBody(TypedDict):
    id: int
    title: str
    venue: str
    start: Annotated[
        DateTime | None, Field(description="In the listing's own time zone, with its offset.")
    ]
    end: Annotated[DateTime | None, Field(description="As `start`.")]
    timezone: Annotated[str, Field(description="The listing's IANA time zone; '' if unknown.")]
    all_day: bool
    when: Annotated[str, Field(description="Start and end for people: 'Sat 6 Dec, 19:30 GMT'.")]
    recurrence: Annotated[
        str,
        Field(
            description="A series' rule in words where it is simple ('every Tuesday'), else ''."
            " A series is one result: `start` and `end` are its next date in the window"
            " (one in progress counts)."
        ),
    ]
    more_dates: Annotated[
        int, Field(description="How many more of a series' dates fall in the window; 0 for one.")
    ]
    dates: Annotated[
        list[DateBody],
        Field(description="The first of those further dates, soonest first (at most 59)."),
    ]
    url: str
    snippet: Annotated[str, Field(description="HTML: escaped text, <mark> around matches.")]
    matched: Annotated[
        list[Stage], Field(description="The stages that found this listing (cache: its ranking).")
    ]
    sources: Annotated[list[SourceBody], Field(description="Where this listing came from.")]
    provenance: Annotated[
        str, Field(description="`sources` for people: 'from Barbican calendar · Time Out feed'.")
    ]


class CountBody(TypedDict):
    value: Annotated[
        str, Field(description="The parameter's value that gives it: 'today', 'feed', a venue.")
    ]
    count: Annotated[int, Field(description="The results a search with it would give.")]
    at_least: Annotated[
        bool, Field(description="True: `count` or more (as many as the stages rank, or more).")
    ]


class FacetsBody(TypedDict):
    """Counts on the filters: for each choice, the search's other filters kept."""

    when: Annotated[list[CountBody], Field(description="today, this-weekend, next-7-days, later")]
    kind: Annotated[list[CountBody], Field(description="Each source kind.")]
    venue: Annotated[list[CountBody], Field(description="The venues of the most listings.")]


class SearchBody(TypedDict):
    """The 200 body of `GET /api/search`."""

    mode: Annotated[Mode, Field(description="Which stages made the ranking.")]
    degraded: Annotated[bool, Field(description="Whether a stage was missing from it.")]
    reasons: Annotated[
        list[Reason],
        Field(
            description="Why it is degraded, why `facets` is null, or why it was read from"
            " the primary rather than a replica (`replica_lagging`, `replica_unavailable`);"
            " [] when none of these."
        ),
    ]
    index_generation: Annotated[
        int | None, Field(description="The vector index generation searched.")
    ]
    cache_age_s: Annotated[
        float | None, Field(description="The age of a cached ranking served, in seconds.")
    ]
    suggestion: Annotated[
        str | None, Field(description="A corrected query when nothing matched, or null.")
    ]
    page: int
    next_page: Annotated[int | None, Field(description="The next page's number, or null.")]
    facets: Annotated[
        FacetsBody | None,
        Field(
            description="Counts on the filters, or null when they were not counted in time"
            " (`facets_timeout` or `facets_error` in `reasons`; the results are whole)."
        ),
    ]
    results: list[ResultBody]
    timings_ms: NotRequired[
        Annotated[dict[str, float], Field(description="Staff only: time spent per stage.")]
    ]


class BadParameterBody(TypedDict):
    """The 400 body: which parameter was refused, and why, in words for people."""

    error: str
    parameter: str


class UnavailableBody(TypedDict):
    """The 503 body (no stage answered within the deadline) and the 504 body (the caller's
    own deadline passed first): both come with `Retry-After`."""

    error: str
    reasons: list[Reason]


def suggest_parameters(*, max_chars: int = MAX_SUGGEST_CHARS) -> tuple[Parameter, ...]:
    """The one parameter `GET /api/suggest` reads."""
    return (
        Parameter(
            "q",
            "What has been typed so far; fewer than two letters or digits are suggested nothing.",
            example="jaz",
            required=True,
            max_length=max_chars,
            pattern=TYPED_TEXT,
        ),
    )


SuggestionKind = Literal["title", "venue"]


class SuggestionBody(TypedDict):
    text: Annotated[str, Field(description="A listing's title or a venue, as it is shown.")]
    kind: SuggestionKind


class SuggestBody(TypedDict):
    """The 200 body of `GET /api/suggest`: the suggestions, best first. Empty when there
    are none, and when they could not be read within their deadline."""

    suggestions: list[SuggestionBody]
