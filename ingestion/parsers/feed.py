"""RSS 0.9x/1.0/2.0 and Atom feeds to listing drafts, one per entry, through feedparser.

Security invariant: feedparser never sees the payload's prolog. We decode the bytes
ourselves, walk everything before the root element (XML declaration, comments, processing
instructions, DOCTYPE) with a linear scan that rejects entity declarations and external
DTDs (bar RSS 0.91's), and hand feedparser UTF-8 that starts with a fixed XML declaration
and then the root element. So whatever encoding a payload declares, nothing is ever
expanded or fetched, and feedparser's own prolog regexes (quadratic in runs of blank lines,
cubic in a crafted first line) only see one short line. It always gets a stream: given
bytes, feedparser.parse first tries them as a file name. defusedxml is no substitute: it
would guard only expat, after those regexes and never the loose parser feedparser falls
back to; behind this scan it finds nothing (docs/decisions/feed-prologs-scanned-not-defusedxml.md).

Decisions:
  - external_id is the entry's id (RSS guid, Atom id, RDF about), else its link, else
    "noid:" + a hash of its title and published date: what a re-poll of the same item
    repeats, and the date keeps apart a weekly item that reuses its title.
  - starts_at/ends_at come only from event extensions (ev:startdate, xCal dtstart). A
    published or updated date says when the item was posted, not when the event is, and
    would put it under the wrong day in date filters; undated listings are still found.
  - An event date that can't be read or falls outside 1900-2100 quarantines the item:
    visitors filter on it, and dropping it quietly would hide the source's mistake.
  - No title once markup is stripped, or one over 500 characters, quarantines the item: a
    title that long is a body in the wrong element, and cutting it would publish garbage.
  - Entries past max_items each become a bad item carrying only their id: the first ones
    (feeds list the newest first) still go through and the counts stay exact.
"""

import codecs
import hashlib
import html
import io
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

import feedparser

from ingestion.drafts import (
    EXCERPT_CHARS,
    BadItem,
    ListingDraft,
    ParseResult,
    PayloadError,
    PayloadIds,
)

# feedparser's time and memory grow with the number of elements, at worst some 20 us and
# 600 bytes each (deep nesting); real 5 MB feeds have 50,000-125,000 "<".
MAX_PAYLOAD_BYTES = 5 * 1024 * 1024
MAX_MARKUP = 200_000
MAX_ID_CHARS = 1000  # SourceRecord.external_id
MAX_TITLE_CHARS = 500
MAX_DESCRIPTION_CHARS = 5000
MAX_VENUE_CHARS = 300
MAX_URL_CHARS = 2000
EARLIEST_YEAR, LATEST_YEAR = 1900, 2100

# Checked in this order because the UTF-32-LE mark begins with the UTF-16-LE one.
_BOMS = (
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
)
# Without a mark, where the zero bytes of the first ASCII characters ("<?" or "<r") fall
# gives the encoding away (XML 1.0, appendix F).
_WIDE_BY_ZEROS: dict[tuple[bool, ...], str] = {
    (True, True, True, False): "utf-32-be",
    (False, True, True, True): "utf-32-le",
    (True, False, True, False): "utf-16-be",
    (False, True, False, True): "utf-16-le",
}
_DECLARED_ENCODING = re.compile(
    rb"""\s*<\?xml\s[^>]{0,200}?encoding\s*=\s*["']([A-Za-z][\w.:-]{0,40})["']"""
)
_ASCII_PROBE = "<?xml version=\"1.0\"?><!DOCTYPE x [<!ENTITY y 'z'>]><x a='&y;'/>"
# Characters XML 1.0 forbids: they would send feedparser to its slower, looser parser, and
# Postgres refuses NUL in text.
_NOT_XML_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_PROLOG_MARKUP = re.compile(r"<(?:!--|\?|!|[A-Za-z_])")
_DECLARATION_PART = re.compile(r"""<!--|<\?|<!ENTITY|["'\[\]>]""", re.IGNORECASE)
_DOCTYPE = re.compile(r"<!DOCTYPE\s+([^\s\[>]+)(?:\s+(SYSTEM|PUBLIC)\b)?", re.IGNORECASE)
_JSON_START = re.compile(r"\s*[\[{]")
_NAME_END = re.compile(r"[\s/>]")
_FEEDPARSER_PROLOG = b'<?xml version="1.0" encoding="utf-8"?>\n'
# An unclosed comment runs to the end, as in browsers; it also keeps this regex linear.
_MARKUP = re.compile(r"<!--.*?(?:-->|\Z)|<![^<>]*>|</?([A-Za-z][A-Za-z0-9]*)[^<>]*>", re.DOTALL)
# Tags inside a run of text ("<b>jazz</b>."); any other tag separates words.
_INLINE_TAGS = frozenset(
    {"a", "abbr", "b", "bdi", "cite", "code", "data", "dfn", "em", "font", "i", "kbd", "mark"}
    | {"q", "s", "samp", "small", "span", "strong", "sub", "sup", "time", "u", "var"}
)
# feedparser knows the RSS event module ("ev") by its URI but names elements of other
# namespaces by the feed's own prefix, which for xCal is conventionally "xCal".
_START_KEYS = ("ev_startdate", "xcal_dtstart")
_END_KEYS = ("ev_enddate", "xcal_dtend")
_VENUE_KEYS = ("ev_location", "xcal_location", "georss_featurename")


class _EntryError(ValueError):
    """Why an entry can't become a listing, worded for editors."""


def parse_feed(payload: bytes, *, max_items: int = 5000) -> ParseResult:
    """Raises PayloadError for a payload that isn't a feed or declares entities or a DTD."""
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise PayloadError(f"payload larger than {MAX_PAYLOAD_BYTES} bytes")
    text = _NOT_XML_CHARS.sub("", _decode(payload))
    if not text or text.isspace():
        raise PayloadError("empty payload")
    if _JSON_START.match(text):
        raise PayloadError("not a feed: JSON (JSON Feed is not supported)", excerpt=text)
    root = _root_start(text)
    if text.count("<", root) > MAX_MARKUP:
        raise PayloadError(f"more than {MAX_MARKUP} tags", excerpt=text)
    document = _FEEDPARSER_PROLOG + text[root:].encode("utf-8", "replace")
    try:
        parsed = feedparser.parse(
            io.BytesIO(document), sanitize_html=True, resolve_relative_uris=True
        )
    except Exception as error:  # feedparser is lenient by design: a crash is this payload's
        raise PayloadError(f"feedparser failed: {error!r}", excerpt=text) from error
    if not parsed.entries and not parsed.get("version"):
        name = _NAME_END.split(text[root + 1 : root + 51], maxsplit=1)[0]
        raise PayloadError(f"not a feed: root element <{name}> is not RSS or Atom", excerpt=text)
    return _results(parsed.entries, max_items)


def _decode(payload: bytes) -> str:
    for bom, codec in _BOMS:
        if payload.startswith(bom):
            return payload[len(bom) :].decode(codec, "replace")
    if wide := _WIDE_BY_ZEROS.get(tuple(byte == 0 for byte in payload[:4])):
        return payload.decode(wide, "replace")
    for codec in filter(None, (_declared_encoding(payload), "utf-8", "cp1252")):
        try:
            return payload.decode(codec)
        except UnicodeError:
            continue
    return payload.decode("latin-1")  # maps every byte


def _declared_encoding(payload: bytes) -> str:
    """The encoding named by an XML declaration, when it could be true.

    We read the declaration as ASCII, so it can only truthfully name an encoding that writes
    ASCII unchanged: a UTF-16 claim in ASCII-readable bytes is ignored. Whatever we decode
    with, the prolog check reads the same text that feedparser will.
    """
    match = _DECLARED_ENCODING.match(payload)
    if match is None:
        return ""
    name = match.group(1).decode("ascii").lower()
    name = "gb18030" if name == "gb2312" else name  # GBK text is routinely labelled gb2312
    try:
        unchanged = _ASCII_PROBE.encode(name) == _ASCII_PROBE.encode("ascii")
    except (LookupError, UnicodeError):
        return ""
    return name if unchanged else ""


def _root_start(text: str) -> int:
    """Where the root element begins, once everything before it has been checked."""
    position = 0
    while match := _PROLOG_MARKUP.search(text, position):
        start, markup = match.start(), match.group()
        if markup == "<!--":
            position = _after(text, start + 4, "-->", "comment")
        elif markup == "<?":
            position = _after(text, start + 2, "?>", "processing instruction")
        elif markup == "<!":
            position = _after_declaration(text, start)
        else:
            return start
    raise PayloadError("not a feed: no XML root element", excerpt=text)


def _after(text: str, position: int, terminator: str, what: str) -> int:
    end = text.find(terminator, position)
    if end < 0:
        raise PayloadError(f"not a feed: unterminated {what} before the root element", excerpt=text)
    return end + len(terminator)


def _after_declaration(text: str, start: int) -> int:
    """The end of a DOCTYPE (or stray <! declaration), rejecting entities and external DTDs."""
    in_subset = False
    position = start
    while match := _DECLARATION_PART.search(text, position):
        markup, position = match.group(), match.end()
        if markup in ('"', "'"):
            position = _after(text, position, markup, "quoted literal")
        elif markup == "<!--":
            position = _after(text, position, "-->", "comment")
        elif markup == "<?":
            position = _after(text, position, "?>", "processing instruction")
        elif markup.upper() == "<!ENTITY":
            raise PayloadError("entity declarations are not allowed", excerpt=text[start:])
        elif markup in ("[", "]"):
            in_subset = markup == "["
        elif not in_subset:  # the ">" that closes the declaration
            _check_doctype(text, start)
            return position
    raise PayloadError("not a feed: unterminated declaration before the root element", excerpt=text)


def _check_doctype(text: str, start: int) -> None:
    doctype = _DOCTYPE.match(text, start)
    if doctype is None:
        return
    name, external = doctype.group(1).lower(), doctype.group(2)
    if name == "html":
        raise PayloadError("not a feed: an HTML page", excerpt=text[start:])
    # RSS 0.91 feeds name Netscape's DTD, the only one RSS ever had: a version label, and
    # like every DOCTYPE it is dropped before feedparser, so never fetched.
    if external and name != "rss":
        raise PayloadError("external DTDs are not allowed", excerpt=text[start:])


def _results(entries: list[Mapping[str, Any]], max_items: int) -> ParseResult:
    result, ids = ParseResult(), PayloadIds()
    for position, entry in enumerate(entries):
        if position >= max_items:
            external_id = _stripped(entry.get("id")) or None
            result.bad.append(BadItem(position, external_id, "over the per-payload item cap"))
            continue
        outcome = _outcome(entry, position)
        if reason := ids.duplicate(outcome.external_id, position):
            outcome = BadItem(position, outcome.external_id, reason, _excerpt(entry))
        result.add(outcome)
    return result


def _outcome(entry: Mapping[str, Any], position: int) -> ListingDraft | BadItem:
    title_type = (entry.get("title_detail") or {}).get("type", "text/plain")
    title = _plain_text(entry.get("title"), title_type)
    external_id = _external_id(entry, title)
    try:
        if not title:
            raise _EntryError("no title")
        if len(title) > MAX_TITLE_CHARS:
            raise _EntryError(f"title longer than {MAX_TITLE_CHARS} characters")
        if len(external_id) > MAX_ID_CHARS:
            raise _EntryError(f"id longer than {MAX_ID_CHARS} characters")
        starts_at, all_day = _event_time(entry, _START_KEYS, "start")
        ends_at, _ = _event_time(entry, _END_KEYS, "end")
    except _EntryError as error:
        kept_id = external_id if 0 < len(external_id) <= MAX_ID_CHARS else None
        return BadItem(position, kept_id, str(error), _excerpt(entry))
    return ListingDraft(
        external_id=external_id,
        title=title,
        position=position,
        description=_description(entry),
        venue=_first_text(entry, _VENUE_KEYS)[:MAX_VENUE_CHARS],
        starts_at=starts_at,
        ends_at=ends_at,
        url=_http_url(entry.get("link")),
        all_day=all_day,
    )


def _external_id(entry: Mapping[str, Any], title: str) -> str:
    if found := _stripped(entry.get("id")) or _stripped(entry.get("link")):
        return found
    if not title:
        return ""  # nothing identifies it; it is quarantined for having no title anyway
    published = _stripped(entry.get("published") or entry.get("updated"))
    return "noid:" + hashlib.sha256(f"{title}\n{published}".encode()).hexdigest()[:32]


def _plain_text(value: object, content_type: str) -> str:
    """Text without tags, comments or runs of whitespace; entities are decoded in HTML only.

    feedparser has already dropped scripts and styles from HTML, and decoded the entities
    of plain text, where a "<3" or "a < b" must survive.
    """
    if not isinstance(value, str):
        return ""
    text = _MARKUP.sub(_tag_gap, value)
    if "html" in content_type:
        text = html.unescape(text)
    return " ".join(text.split())


def _tag_gap(markup: re.Match[str]) -> str:
    return "" if (markup.group(1) or "").lower() in _INLINE_TAGS else " "


def _description(entry: Mapping[str, Any]) -> str:
    # Full content before the summary: more for search to match, capped all the same.
    for detail in (*entry.get("content", ()), entry.get("summary_detail")):
        if detail and (text := _plain_text(detail.get("value"), detail.get("type", ""))):
            return text[:MAX_DESCRIPTION_CHARS]
    return ""


def _first_text(entry: Mapping[str, Any], keys: Iterable[str]) -> str:
    return next((text for key in keys if (text := _plain_text(entry.get(key), ""))), "")


def _event_time(
    entry: Mapping[str, Any], keys: Iterable[str], which: str
) -> tuple[datetime | None, bool]:
    """A UTC datetime and whether it was a bare date (an all-day event)."""
    raw = _first_text(entry, keys)
    if not raw:
        return None, False
    when: datetime | None
    try:
        day = date.fromisoformat(raw)
        when, all_day = datetime(day.year, day.month, day.day, tzinfo=UTC), True
    except ValueError:
        when, all_day = _datetime(raw), False
    if when is None:
        raise _EntryError(f"{which} date not readable: {raw[:40]!r}")
    if not EARLIEST_YEAR <= when.year <= LATEST_YEAR:
        raise _EntryError(f"{which} date out of range: {raw[:40]!r}")
    # A time without an offset: feeds name no zone, and UTC is the one neutral reading.
    return (when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)), all_day


def _datetime(raw: str) -> datetime | None:
    """ISO 8601 (ev:, xCal) or, from sloppier publishers, RFC 822 like pubDate."""
    try:
        return datetime.fromisoformat(raw)
    except ValueError:
        pass
    try:
        return parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None


def _http_url(value: object) -> str:
    url = _stripped(value)
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unbalanced "[" in the host
        return ""
    usable = parts.scheme.lower() in ("http", "https") and parts.netloc and " " not in url
    return url if usable and len(url) <= MAX_URL_CHARS else ""


def _stripped(value: object) -> str:
    return value.strip() if isinstance(value, str) else ""


def _excerpt(entry: Mapping[str, Any]) -> str:
    """The entry's text fields as "key: value", enough for an editor to recognise it."""
    parts: list[str] = []
    for key, value in entry.items():
        if isinstance(value, str) and value.strip():
            parts.append(f"{key}: {' '.join(value[:EXCERPT_CHARS].split())}")
            if sum(map(len, parts)) >= EXCERPT_CHARS:
                break
    return "; ".join(parts)
