"""From the raw `q` and `k` request parameters to a validated Query.

The text reaches Postgres only as a bound parameter of websearch_to_tsquery, which accepts
any string: quotes, tsquery operators and SQL-looking text are searched for, never refused.
A BadQueryError is for what we won't search for at all; its message is shown to the user."""

import re
import unicodedata
from typing import Literal, get_args

from ingestion.text import normalise
from retrieval.types import Query
from retrieval.web.api_types import SORTS

# In precedence order: the first class whose rule matches is the query's class.
QueryClass = Literal[
    "quoted", "operators", "no_terms", "numeric", "non_latin", "single_term", "short", "long"
]
QUERY_CLASSES: tuple[QueryClass, ...] = get_args(QueryClass)

# Tab, LF, VT, FF and CR (\x09-\x0d) arrive from pastes and textareas and are collapsed like
# spaces; every other C0/C1 control is refused (NUL can't even be stored in Postgres text).
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x9f]")
# Django decodes invalid UTF-8 in a URL to U+FFFD; lone surrogates (e.g. from argv's
# surrogateescape) get the same treatment, as psycopg could not encode them.
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_K = re.compile(r"[0-9]{1,9}")  # ASCII digits only; bounded so int() never sees a huge string
# websearch_to_tsquery syntax: "a phrase", -negation (of a word or a phrase), `x or y`.
_QUOTED_PHRASE = re.compile(r'"[^"]*[^\W_][^"]*"')
_NEGATION = re.compile(r'(?:^|\s)-(?:"|[^\W_])')
_NEGATED = re.compile(r'(?:^|\s)-("[^"]*"|[^\s"]+)')
_OPERATOR = re.compile(_NEGATION.pattern + r"|\S\s+or\s+\S", re.IGNORECASE)


class BadQueryError(ValueError):
    """A request parameter we refuse; str(error) is the user-facing message (HTTP 400)
    and `parameter` the name of the parameter it is about, for the response to say."""

    def __init__(self, message: str, *, parameter: str = "q") -> None:
        super().__init__(message)
        self.parameter = parameter


def parse_query(
    raw_q: str | None,
    raw_k: str | None,
    *,
    max_chars: int = 200,
    max_k: int = 50,
    default_k: int = 10,
) -> Query:
    text = _clean_text(raw_q, max_chars)
    # A query of punctuation only normalises to "": it stays valid (it just matches nothing
    # lexically) and is its own key. Each of its non-space characters is one normalise()
    # never outputs, so that key can't collide with the key of a query that has words.
    normalised = normalise(text) or text
    k = _parse_k(raw_k, max_k, default_k)
    return Query(text=text, normalised=normalised, k=k, query_class=query_class(text))


def query_class(text: str) -> QueryClass:
    """A metrics label from the query's shape, never its content."""
    if _QUOTED_PHRASE.search(text):
        return "quoted"
    if _OPERATOR.search(text):
        return "operators"
    normalised = normalise(text)
    if not normalised:
        return "no_terms"
    letters = [ch for ch in normalised if ch.isalpha()]
    if not letters:
        return "numeric"
    latin = sum(unicodedata.name(ch, "").startswith("LATIN ") for ch in letters)
    if latin * 2 < len(letters):
        return "non_latin"
    terms = len(normalised.split())
    if terms == 1:
        return "single_term"
    return "short" if terms <= 3 else "long"


def requires_every_term(text: str) -> bool:
    """Whether the query's own syntax asks for exact matching: a quoted phrase or a
    negated term. An `or` does not: it asks for any term already."""
    return bool(_QUOTED_PHRASE.search(text) or _NEGATION.search(text))


def relaxable(text: str) -> bool:
    """Whether listings matching only some of the query's terms may answer it: yes, but
    for a short query whose syntax asks for exact matching. A question of more than three
    terms is read as words even with a quoted phrase or a "-" in it (judged questions
    quote titles and write "-dash": exact matching found nothing for them); its negated
    words still exclude (`excluded`)."""
    return not requires_every_term(text) or len(normalise(text).split()) > 3


def excluded(text: str) -> str | None:
    """The words and phrases `text` negates, as one web-search query that any of them
    matches; None when it negates nothing."""
    negated = [match.group(1) for match in _NEGATED.finditer(text)]
    return " or ".join(negated) if negated else None


def parse_typed(raw: str | None, max_chars: int) -> str:
    """What a visitor has typed so far, for suggestions: cleaned as `q` is, but blank is
    allowed (it is suggested nothing)."""
    return _clean_text(raw, max_chars, required=False)


def _clean_text(raw: str | None, max_chars: int, *, required: bool = True) -> str:
    """NFC, whitespace collapsed and stripped; refused if empty (when `required`), too
    long or with controls."""
    if raw is not None and _CONTROL.search(raw):
        raise BadQueryError("q contains control characters")
    text = " ".join(unicodedata.normalize("NFC", _SURROGATE.sub("\ufffd", raw or "")).split())
    if not text and required:
        raise BadQueryError("q is required")
    if len(text) > max_chars:
        raise BadQueryError(f"q is longer than {max_chars} characters")
    return text


def _parse_k(raw: str | None, max_k: int, default_k: int) -> int:
    if not raw:  # absent, or left blank in a form
        return default_k
    if _K.fullmatch(raw) and 1 <= int(raw) <= max_k:
        return int(raw)
    raise BadQueryError(f"k must be a whole number from 1 to {max_k}", parameter="k")


def parse_sort(raw: str | None) -> str:
    """How a page of results is ordered: by relevance (the default) or by start."""
    if not raw:
        return SORTS[0]
    if raw in SORTS:
        return raw
    raise BadQueryError(f"sort must be one of {', '.join(SORTS)}", parameter="sort")


def parse_page(raw: str | None, max_page: int) -> int:
    """Which page of k results, from 1: every page is a slice of the one ranking."""
    if not raw:
        return 1
    if _K.fullmatch(raw) and 1 <= int(raw) <= max_page:
        return int(raw)
    raise BadQueryError(f"page must be a whole number from 1 to {max_page}", parameter="page")
