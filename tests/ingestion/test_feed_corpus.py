"""The shared real-world feed corpora through parse_feed.

(a) Every input of feedparser's, gofeed's and feed-rs's test corpora gives a result that
accounts for each entry, or a PayloadError; nothing else escapes. (b) Entry titles agree
with the expected parses gofeed and feed-rs ship, apart from differences we intend.
"""

import html
import json
import re
import time
from collections import Counter
from pathlib import Path

import pytest

from ingestion.drafts import ParseResult, PayloadError
from ingestion.parsers.feed import parse_feed
from tests.conftest import SHARED_DATA

FEEDS = SHARED_DATA / "feeds"
if not FEEDS.is_dir():
    pytest.skip(f"shared feed corpora not found at {FEEDS}", allow_module_level=True)

CORPORA = ("feedparser-tests", "gofeed-testdata", "feed-rs-fixtures")
# Inputs per corpus, from each SOURCE.txt (feedparser: its per-folder counts, which sum to
# 2,123 with the 3 .rdf examples and one JSON Feed; gofeed: 541 XML and 11 JSON Feed).
INPUTS = {"feedparser-tests": 2123, "gofeed-testdata": 552, "feed-rs-fixtures": 68}
# The XML inputs we reject, and why; every JSON input is a JSON Feed, which we don't read.
_NOT_RSS_OR_ATOM = "not a feed: root element <{}> is not RSS or Atom"
EXPECTED_REJECTIONS = {
    # CDF channels without items: feedparser itself recognises no feed in them.
    **{
        f"feedparser-tests/tests/wellformed/cdf/channel_{name}.xml": _NOT_RSS_OR_ATOM.format(
            "CHANNEL"
        )
        for name in (
            "abstract_map_description",
            "abstract_map_tagline",
            "href_map_link",
            "href_map_links",
            "lastmod",
            "lastmod_parsed",
            "title",
        )
    },
    "feedparser-tests/tests/wellformed/rss/entity_in_doctype.xml": (
        "entity declarations are not allowed"
    ),
    "feedparser-tests/tests/wellformed/rdf/doctype_contains_entity_decl.xml": (
        "entity declarations are not allowed"
    ),
    "feedparser-tests/tests/illformed/always_strip_doctype.xml": "not a feed: an HTML page",
    "feedparser-tests/tests/illformed/rss_empty_document.xml": "not a feed: no XML root element",
    # An RSS 0.90 document without a channel: nothing marks it as a feed.
    "gofeed-testdata/testdata/parser/rss/version_rdf_090.xml": _NOT_RSS_OR_ATOM.format("rdf:RDF"),
    "gofeed-testdata/testdata/parser/universal/empty_feed.xml": "empty payload",
    "gofeed-testdata/testdata/parser/universal/unknown_feed.xml": _NOT_RSS_OR_ATOM.format("note"),
    "feed-rs-fixtures/feed-rs/fixture/xml/xml_sample_1.xml": _NOT_RSS_OR_ATOM.format("catalog"),
    "feed-rs-fixtures/feed-rs/fixture/xml/xml_sample_2.xml": _NOT_RSS_OR_ATOM.format("catalog"),
}
_JSON_FEED = "not a feed: JSON (JSON Feed is not supported)"
# Fixtures where we and the reference parser differ on purpose, and why.
KNOWN_DIFFERENCES = {
    "gofeed-testdata/testdata/parser/rss/issue_217_enclosure_children.xml": (
        "feedparser reads media:title as the entry's title; gofeed leaves it to its media "
        "extension, so expects none"
    ),
}
_TAG = re.compile(r"<[^>]*>")

Outcome = ParseResult | Exception


def is_expected_output(path: Path) -> bool:
    """gofeed pairs an input with <stem>.json or <stem>_expected.json; feed-rs <stem>.serde.json."""
    return path.suffix == ".json" and (
        path.name.endswith((".serde.json", "_expected.json")) or path.with_suffix(".xml").exists()
    )


def corpus_inputs(corpus: str) -> list[Path]:
    return sorted(
        path
        for path in (FEEDS / corpus).rglob("*")
        if path.suffix in (".xml", ".rdf", ".json") and not is_expected_output(path)
    )


@pytest.fixture(scope="module")
def outcomes() -> dict[Path, Outcome]:
    """Each input's result, or the exception it raised (collected, so all are reported)."""
    found: dict[Path, Outcome] = {}
    for corpus in CORPORA:
        for path in corpus_inputs(corpus):
            started = time.perf_counter()
            try:
                found[path] = parse_feed(path.read_bytes())
            except Exception as error:  # any other type is a failure, reported below
                found[path] = error
            assert time.perf_counter() - started < 2.0, f"{path} took too long"
    return found


@pytest.mark.parametrize("corpus", CORPORA)
def test_every_input_gives_an_accounted_result_or_a_payload_error(
    corpus: str, outcomes: dict[Path, Outcome], capsys: pytest.CaptureFixture[str]
) -> None:
    mine = {path: outcome for path, outcome in outcomes.items() if corpus in path.parts}
    escaped = [f"{path}: {error!r}" for path, error in mine.items() if _escaped(error)]
    unaccounted = [str(path) for path, result in mine.items() if not _accounted(result)]
    unexpected = [
        f"{path}: {_rejection(outcome)!r}, expected {expected_rejection(path)!r}"
        for path, outcome in mine.items()
        if _rejection(outcome) != expected_rejection(path)
    ]
    results = [outcome for outcome in mine.values() if isinstance(outcome, ParseResult)]
    rejected = Counter(o.reason for o in mine.values() if isinstance(o, PayloadError))
    drafts = sum(len(result.drafts) for result in results)
    bad = sum(len(result.bad) for result in results)
    with capsys.disabled():
        print(
            f"\n{corpus}: {len(mine)} files, {drafts + bad} entries = {drafts} drafts + "
            f"{bad} bad; {rejected.total()} payload errors {dict(rejected)}"
        )

    assert not escaped, "\n".join(escaped)
    assert not unaccounted, "\n".join(unaccounted)
    assert not unexpected, "\n".join(unexpected)
    assert len(mine) == INPUTS[corpus]


def test_titles_agree_with_the_expected_parses_of_gofeed_and_feed_rs(
    outcomes: dict[Path, Outcome], capsys: pytest.CaptureFixture[str]
) -> None:
    agreement: Counter[str] = Counter()
    mismatches: list[str] = []
    for path, expected in _expected_titles():
        name = str(path.relative_to(FEEDS))
        outcome = outcomes[path]
        if name in KNOWN_DIFFERENCES:
            agreement["known differences"] += 1
            continue
        if not isinstance(outcome, ParseResult):
            mismatches.append(f"{name}: rejected ({outcome}), expected {expected}")
            continue
        if outcome.items != len(expected):
            mismatches.append(f"{name}: {outcome.items} entries, expected {len(expected)}")
            continue
        titles = {draft.position: draft.title for draft in outcome.drafts}
        reasons = {bad.position: bad.reason for bad in outcome.bad}
        for position, title in enumerate(expected):
            how = _agreement(title, titles.get(position), reasons.get(position))
            if how:
                agreement[how] += 1
            else:
                ours = titles.get(position, reasons.get(position))
                mismatches.append(f"{name}[{position}]: expected {title!r}, got {ours!r}")
    with capsys.disabled():
        print(f"\ntitles: {dict(agreement)}; {len(mismatches)} mismatched")

    assert not mismatches, "\n".join(mismatches)
    assert agreement["identical"] >= 100
    assert agreement.total() >= 350


def _rejection(outcome: Outcome) -> str:
    return outcome.reason if isinstance(outcome, PayloadError) else ""


def expected_rejection(path: Path) -> str:
    if path.suffix == ".json":
        return _JSON_FEED
    return EXPECTED_REJECTIONS.get(str(path.relative_to(FEEDS)), "")


def _escaped(outcome: Outcome) -> bool:
    return isinstance(outcome, Exception) and not isinstance(outcome, PayloadError)


def _accounted(outcome: Outcome) -> bool:
    if not isinstance(outcome, ParseResult):
        return True
    positions = [d.position for d in outcome.drafts] + [b.position for b in outcome.bad]
    return sorted(p for p in positions if p is not None) == list(range(outcome.items))


def _expected_titles() -> list[tuple[Path, list[str | None]]]:
    """(input, expected entry titles) for every fixture whose expected parse has entries."""
    pairs: list[tuple[Path, list[str | None]]] = []
    for path in corpus_inputs("gofeed-testdata"):
        expected = path.with_suffix(".json")
        if path.suffix == ".xml" and expected.exists():
            parse = json.loads(expected.read_text())  # items (RSS) or entries (Atom)
            entries = parse.get("items") or parse.get("entries") or []
            pairs.append((path, [entry.get("title") for entry in entries]))
    for path in corpus_inputs("feed-rs-fixtures"):
        expected = path.with_name(f"{path.stem}.serde.json")
        if path.suffix == ".xml" and expected.exists():
            entries = json.loads(expected.read_text())["entries"]
            pairs.append((path, [(entry["title"] or {}).get("content") for entry in entries]))
    return [(path, titles) for path, titles in pairs if titles]


def _agreement(expected: str | None, ours: str | None, reason: str | None) -> str:
    """How our outcome agrees with the expected title, or "" if it doesn't.

    Both parsers collapse whitespace differently, so we compare after collapsing it. The
    references keep markup in titles; we strip it ("<p>Title</p>" -> "Title"), and
    feedparser decodes entities in titles it reads as HTML, which gofeed leaves as written
    ("&lt;p&gt;" in a CDATA section). A title the reference doesn't find is one we
    quarantine, so an editor sees the entry.
    """
    if not expected or not expected.strip():
        return "titleless, quarantined" if reason == "no title" else ""
    candidates = {
        "identical": expected,
        "markup stripped": _TAG.sub(" ", expected),
        "entities decoded": html.unescape(expected),
    }
    for how, title in candidates.items():
        if ours == " ".join(title.split()):
            return how
    return ""
