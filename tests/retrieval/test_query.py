"""Parsing the raw `q` and `k` parameters: what is refused, what is searched for as typed."""

import pytest
from django.http import QueryDict
from hypothesis import given
from hypothesis import strategies as st

from ingestion.text import normalise
from retrieval.query.parse import QUERY_CLASSES, BadQueryError, parse_query, query_class
from retrieval.types import Query

# Every code point, lone surrogates and controls included.
ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=300)
REFUSALS = {"q is required", "q is longer than 200 characters", "q contains control characters"}


def _refusal(raw_q: str | None, raw_k: str | None = None, **limits: int) -> str:
    with pytest.raises(BadQueryError) as caught:
        parse_query(raw_q, raw_k, **limits)
    return str(caught.value)


def _query_or_refusal(raw_q: str | None, raw_k: str | None = None) -> Query | str:
    try:
        return parse_query(raw_q, raw_k)
    except BadQueryError as error:
        return str(error)


@pytest.mark.parametrize("raw_q", [None, "", " ", "  \t\r\n ", "\u00a0", "\u3000\u2028"])
def test_it_requires_some_text(raw_q: str | None) -> None:
    assert _refusal(raw_q) == "q is required"


def test_it_refuses_text_over_the_limit_counted_after_normalisation() -> None:
    assert _refusal("a" * 201) == "q is longer than 200 characters"
    assert _refusal("ab c", max_chars=3) == "q is longer than 3 characters"
    assert parse_query("a" * 200, None).text == "a" * 200
    assert parse_query("  a" + " " * 500 + "b\t\n ", None, max_chars=3).text == "a b"
    # "e" + combining acute is one character once composed (NFC).
    assert parse_query("e\u0301" * 200, None).text == "\u00e9" * 200


@pytest.mark.parametrize(
    "raw_q", ["\x00", "jazz\x00night", "\x07", "\x1b[31mjazz", "a\x1fb", "\x7f", "a\x85b", "\x9f"]
)
def test_it_refuses_control_characters(raw_q: str) -> None:
    assert _refusal(raw_q) == "q contains control characters"


def test_plain_whitespace_controls_are_collapsed_not_refused() -> None:
    assert parse_query("jazz\tnight\r\n\x0b\x0cout", None).text == "jazz night out"


@pytest.mark.parametrize(
    "raw_q",
    [
        "'; DROP TABLE x; --",
        "1' OR '1'='1",
        'unbalanced "quote',
        "it's",
        "jazz & blues | !rock <-> folk:* (x)",
        "& | ! <-> : * ( )",
        "\\",
        "%_",
        "$$; SELECT 1; $$",
    ],
)
def test_syntax_and_injection_strings_are_searched_for_as_typed(raw_q: str) -> None:
    assert parse_query(raw_q, None).text == raw_q


def test_invalid_utf8_in_the_url_gives_a_normal_query() -> None:
    raw_q = QueryDict("q=caf%E9+%FF%FEjazz")["q"]  # decoded by Django with U+FFFD
    query = parse_query(raw_q, None)
    assert query.text == "caf\ufffd \ufffd\ufffdjazz"
    assert query.normalised == "caf jazz"
    assert query.query_class in QUERY_CLASSES


def test_lone_surrogates_become_replacement_characters() -> None:
    query = parse_query("jazz\udcff\ud800", None)
    assert query.text == "jazz\ufffd\ufffd"
    query.text.encode("utf-8")  # psycopg must be able to send it


def test_text_is_kept_as_typed_apart_from_nfc_and_whitespace() -> None:
    query = parse_query("  Cafe\u0301   NIGHT! ", None)
    assert query.text == "Caf\u00e9 NIGHT!"
    assert query.normalised == "cafe night"


@pytest.mark.parametrize(
    "raw_q",
    [
        "Jazz  NIGHT!",
        "jazz night",
        "J\u00e1zz night",
        "Ja\u0301zz night",
        "\tJAZZ\u00a0night ",
        "jazz\u2014night...",
        "\uff2a\uff21\uff3a\uff3a night",  # fullwidth
        "jazz_night",
    ],
)
def test_equivalent_queries_share_a_cache_key(raw_q: str) -> None:
    assert parse_query(raw_q, None).normalised == "jazz night"


def test_different_queries_have_different_cache_keys() -> None:
    keys = {parse_query(q, None).normalised for q in ["jazz night", "jazz nights", "night jazz"]}
    assert len(keys) == 3


@pytest.mark.parametrize("raw_q", ["!!!", "''", '"', "?", "\u00b4", "_", "\u037a", "-- //"])
def test_punctuation_only_is_valid_and_keeps_a_key_of_its_own(raw_q: str) -> None:
    query = parse_query(raw_q, None)
    assert query.text == raw_q
    assert query.normalised == raw_q
    assert query.query_class == "no_terms"


def test_punctuation_only_keys_differ_from_each_other() -> None:
    assert len({parse_query(q, None).normalised for q in ["!!!", "''", "?", "!"]}) == 4


@given(ANY_TEXT)
def test_a_fallback_key_never_looks_like_the_key_of_a_query_with_words(raw_q: str) -> None:
    """normalise() outputs are words; a fallback key normalises to nothing, a real one doesn't."""
    query = _query_or_refusal(raw_q)
    if isinstance(query, str):
        return
    assert query.normalised
    assert (normalise(query.normalised) == "") == (normalise(query.text) == "")


@pytest.mark.parametrize(
    ("raw_k", "k"), [(None, 10), ("", 10), ("1", 1), ("7", 7), ("50", 50), ("007", 7)]
)
def test_k_defaults_and_accepts_whole_numbers_in_range(raw_k: str | None, k: int) -> None:
    assert parse_query("jazz", raw_k).k == k


@pytest.mark.parametrize(
    "raw_k",
    ["0", "51", "-1", "+5", " 5", "5\n", "abc", "1.0", "5.", "1e3", "true", "True", "0x10",
     "\u0665", "\uff15", "1_0", "9" * 5000],
)  # fmt: skip
def test_k_refuses_anything_but_a_whole_number_in_range(raw_k: str) -> None:
    assert _refusal("jazz", raw_k) == "k must be a whole number from 1 to 50"


def test_k_limits_are_configurable() -> None:
    assert parse_query("jazz", None, default_k=3).k == 3
    assert parse_query("jazz", "100", max_k=100).k == 100
    assert _refusal("jazz", "6", max_k=5) == "k must be a whole number from 1 to 5"


@pytest.mark.parametrize(
    ("raw_q", "raw_k", "parameter"), [("", None, "q"), ("a\x00", None, "q"), ("jazz", "0", "k")]
)
def test_each_refusal_names_its_parameter(raw_q: str, raw_k: str | None, parameter: str) -> None:
    with pytest.raises(BadQueryError) as caught:
        parse_query(raw_q, raw_k)
    assert caught.value.parameter == parameter


@pytest.mark.parametrize(
    ("raw_q", "expected"),
    [
        ("jazz", "single_term"),
        ("Jazz!", "single_term"),
        ("jazz night", "short"),
        ("live jazz tonight", "short"),
        ("live jazz in the park", "long"),
        ('"jazz night" park', "quoted"),
        ('"jazz', "single_term"),
        ('"!!" jazz', "single_term"),
        ("jazz -blues", "operators"),
        ('-"free jazz"', "quoted"),
        ("jazz or blues", "operators"),
        ("jazz OR blues", "operators"),
        ("jazz-funk", "short"),
        ("orchestra", "single_term"),
        ("or", "single_term"),
        ("2024", "numeric"),
        ("10:30 2024", "numeric"),
        ("\u0968\u0966\u0968\u096a", "numeric"),  # Devanagari digits
        ("\u97f3\u697d\u796d", "non_latin"),
        ("\u0434\u0436\u0430\u0437 \u043a\u043b\u0443\u0431 jazz", "non_latin"),
        ("jazz \u0434\u0436\u0430\u0437", "short"),
        ("caf\u00e9 cr\u00e8me br\u00fbl\u00e9e", "short"),
        ("!!!", "no_terms"),
        ("'; DROP TABLE x; --", "short"),
    ],
)
def test_query_classes(raw_q: str, expected: str) -> None:
    assert expected in QUERY_CLASSES
    assert query_class(raw_q) == expected
    assert parse_query(raw_q, None).query_class == expected


def test_the_class_depends_on_shape_not_content() -> None:
    assert len({query_class(q) for q in ["jazz", "opera", "short", "long", "numeric"]}) == 1
    assert len({query_class(q) for q in ["jazz night", "blues club", "single term"]}) == 1


def test_query_classes_are_a_small_fixed_set_of_labels() -> None:
    assert len(set(QUERY_CLASSES)) == len(QUERY_CLASSES) <= 10
    assert all(label.replace("_", "").isalpha() and label.islower() for label in QUERY_CLASSES)


@given(ANY_TEXT)
def test_any_text_is_refused_cleanly_or_gives_a_query_that_postgres_can_take(raw_q: str) -> None:
    query = _query_or_refusal(raw_q)
    if isinstance(query, str):
        assert query in REFUSALS
        return
    assert query.query_class in QUERY_CLASSES
    assert query.text == " ".join(query.text.split())
    assert 0 < len(query.text) <= 200
    assert "\x00" not in query.text
    query.text.encode("utf-8")
    assert parse_query(query.text, None) == query  # parsing is idempotent


@given(st.text(st.characters(exclude_categories=()), max_size=20))
def test_any_k_is_refused_cleanly_or_in_range(raw_k: str) -> None:
    query = _query_or_refusal("jazz", raw_k)
    if isinstance(query, str):
        assert query == "k must be a whole number from 1 to 50"
        return
    assert 1 <= query.k <= 50
    assert query.k == (10 if raw_k == "" else int(raw_k))
