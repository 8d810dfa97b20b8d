"""The LexicalIndex contract (retrieval/protocols.py), run against the fake that hybrid.py's
tests use (tests/retrieval_fakes.py) and against Postgres (retrieval/pg/lexical.py):

- at most `limit` distinct candidates, best first: a title match before a listing that
  matches only in its description;
- only active listings: one withdrawn is no longer answered;
- a search that has to wait ends with `StageTimeoutError` at its own timeout, and a
  cancelled one leaves nothing running (tests/contracts/stages.py).

Then the Postgres index's own promises: its bounded pool and its prepared statements.
"""

import dataclasses
import itertools
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any, Protocol

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone
from psycopg import AsyncClientCursor

from ingestion.models import Audience, Listing
from retrieval.bounds.deadline import Deadline
from retrieval.pg import lexical as pg_lexical
from retrieval.pg import vocabulary
from retrieval.pg.lexical import PgLexicalIndex
from retrieval.pg.pool import connection
from retrieval.pg.statement import LEXICAL_TAG
from retrieval.protocols import LexicalIndex
from retrieval.query.parse import parse_query
from retrieval.types import Candidate, DateFilter, Query, SearchFilters
from tests.contracts.stages import (
    FakeStage,
    PostgresStage,
    Search,
    StageDeadlineContract,
    StageSubject,
    assert_best_first,
)
from tests.retrieval_fakes import FixedLexical

FESTIVAL = Query("festival", "festival", 10, "short")
BUDGET_MS = 1000.0


async def lexical_search(
    index: LexicalIndex, query: Query, limit: int, budget_ms: float
) -> list[Candidate]:
    """Every call of the seam goes through here: the one line its signature touches."""
    return (await index.search(query, limit, Deadline.after(budget_ms))).candidates


class LexicalSubject(StageSubject, Protocol):
    @property
    def index(self) -> LexicalIndex: ...

    async def listing(self, *, in_title: bool) -> int:
        """A new listing that matches "festival" in its title, or only in its description."""
        ...

    async def withdraw(self, listing_id: int) -> None: ...


class FakeLexicalSubject(FakeStage[FixedLexical]):
    def __init__(self) -> None:
        super().__init__(FixedLexical([]))
        self._ids = itertools.count(1)
        self._titled: list[int] = []
        self._described: list[int] = []

    async def listing(self, *, in_title: bool) -> int:
        listing_id = next(self._ids)
        (self._titled if in_title else self._described).append(listing_id)
        self.index.ids = self._titled + self._described  # the fake answers in this order
        return listing_id

    async def withdraw(self, listing_id: int) -> None:
        self.index.withdrawn.add(listing_id)


class PostgresLexicalSubject(PostgresStage):
    def __init__(self, database_url: str) -> None:
        super().__init__(database_url, "ingestion_listing", LEXICAL_TAG)
        self.index = PgLexicalIndex()

    async def listing(self, *, in_title: bool) -> int:
        title, description = (
            ("Festival night", "Music.") if in_title else ("Walk", "A walk to the festival.")
        )
        return (await Listing.objects.acreate(title=title, description=description)).pk

    async def withdraw(self, listing_id: int) -> None:
        await Listing.objects.filter(pk=listing_id).aupdate(status=Listing.Status.WITHDRAWN)


@pytest.fixture
async def subject(database_url: str | None) -> AsyncIterator[LexicalSubject]:
    if database_url is None:
        yield FakeLexicalSubject()
        return
    postgres = PostgresLexicalSubject(database_url)
    yield postgres
    await postgres.close()


async def listings(
    subject: LexicalSubject, *, described: int, titled: int
) -> tuple[list[int], list[int]]:
    """Listings matching "festival" only in their description, made first (so a scan in
    physical order meets them first), then listings with it in their title."""
    body = [await subject.listing(in_title=False) for _ in range(described)]
    return body, [await subject.listing(in_title=True) for _ in range(titled)]


class TestLexicalIndex(StageDeadlineContract[LexicalSubject]):
    async def one_search(self, subject: LexicalSubject) -> Search:
        await subject.listing(in_title=True)
        return lambda budget_ms: lexical_search(subject.index, FESTIVAL, 5, budget_ms)

    async def test_it_answers_at_most_limit_candidates_best_first(
        self, subject: LexicalSubject
    ) -> None:
        body, titled = await listings(subject, described=4, titled=4)
        found = await lexical_search(subject.index, FESTIVAL, 5, BUDGET_MS)
        assert_best_first(found, 5)
        assert {c.listing_id for c in found[:4]} == set(titled)
        assert found[4].listing_id in body

    async def test_it_answers_only_active_listings(self, subject: LexicalSubject) -> None:
        kept, withdrawn = await subject.listing(in_title=True), await subject.listing(in_title=True)
        await subject.withdraw(withdrawn)
        found = await lexical_search(subject.index, FESTIVAL, 5, BUDGET_MS)
        assert [c.listing_id for c in found] == [kept]


# The Postgres index's own promises.


@pytest.fixture
def postgres(transactional_db: None, test_database_url: str) -> PostgresLexicalSubject:
    return PostgresLexicalSubject(test_database_url)


async def test_when_matches_exceed_the_pool_title_matches_are_the_ones_ranked(
    postgres: PostgresLexicalSubject, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, titled = await listings(postgres, described=6, titled=3)
    monkeypatch.setattr(pg_lexical, "POOL", 3)
    found = await lexical_search(postgres.index, FESTIVAL, 3, BUDGET_MS)
    assert sorted(c.listing_id for c in found) == sorted(titled)


async def test_when_matches_fit_in_the_pool_every_match_is_ranked(
    postgres: PostgresLexicalSubject, monkeypatch: pytest.MonkeyPatch
) -> None:
    body, titled = await listings(postgres, described=2, titled=2)
    monkeypatch.setattr(pg_lexical, "POOL", 4)  # no title match may take a second place
    found = await lexical_search(postgres.index, FESTIVAL, 10, BUDGET_MS)
    assert sorted(c.listing_id for c in found) == sorted(body + titled)
    assert {c.listing_id for c in found[:2]} == set(titled)  # title weight ranks first


async def test_the_prepared_statements_answer_as_the_statements_they_stand_for(
    postgres: PostgresLexicalSubject, monkeypatch: pytest.MonkeyPatch
) -> None:
    await listings(postgres, described=3, titled=3)
    await sync_to_async(vocabulary.refresh)()
    for query in (FESTIVAL, Query("festivl walk", "festivl walk", 10, "short")):
        prepared = await lexical_search(postgres.index, query, 10, BUDGET_MS)
        async with connection(1) as conn:
            cursor = await conn.execute("SELECT name FROM pg_prepared_statements")
            names = {row[0] for row in await cursor.fetchall()}
        assert {name for name, _ in pg_lexical._PREPARED.values()} <= names
        with monkeypatch.context() as patched:
            patched.setattr(
                pg_lexical, "_PREPARED", dict.fromkeys(pg_lexical._PREPARED, ("none", ""))
            )
            assert await lexical_search(postgres.index, query, 10, BUDGET_MS) == prepared
        assert prepared  # the second query is answered through spelling correction


async def test_a_filtered_search_prepares_its_shape_once_and_answers_as_its_text(
    postgres: PostgresLexicalSubject, monkeypatch: pytest.MonkeyPatch
) -> None:
    soon = timezone.now() + timedelta(days=2)
    walk, talk, _ = [
        await Listing.objects.acreate(title=title, venue=venue, starts_at=starts_at)
        for title, venue, starts_at in (
            ("Festival walk", "Cafe Oto", soon),
            ("Festival talk", "Cafe Oto", soon + timedelta(days=30)),
            ("Festival run", "Elsewhere", soon),
        )
    ]
    week = DateFilter(
        ends_after=timezone.now(),
        starts_before=timezone.now() + timedelta(days=7),
        not_ended=True,
        ended=False,
        undated=False,
    )
    query = dataclasses.replace(FESTIVAL, filters=SearchFilters(dates=week, venue="cafe oto"))
    sent: list[str] = []
    execute = AsyncClientCursor.execute

    async def recording(cursor: AsyncClientCursor[Any], text: Any, *args: Any, **kw: Any) -> Any:
        sent.append(str(text))
        return await execute(cursor, text, *args, **kw)

    with monkeypatch.context() as patched:
        patched.setattr(AsyncClientCursor, "execute", recording)
        runs = [await lexical_search(postgres.index, query, 10, BUDGET_MS) for _ in range(3)]
        patched.setattr(pg_lexical, "_prepared_for", lambda *_: ("none", ""))
        as_text = await lexical_search(postgres.index, query, 10, BUDGET_MS)

    # Every filter value bound (a timestamp each way, the venue's words) and its
    # statement planned once per connection, not at each search.
    assert [c.listing_id for c in as_text] == [walk.pk]
    assert runs == [as_text] * 3
    assert all("EXECUTE searchsite_lexical_0_" in text for text in sent[:3])
    assert "EXECUTE" not in sent[3]
    assert talk.pk not in {c.listing_id for c in as_text}


# Partial matches: a natural-language question matches no listing on every term.


async def make(*titles_and_descriptions: tuple[str, str], audience: str = "public") -> list[int]:
    made = [
        await Listing.objects.acreate(title=title, description=text, audience=audience)
        for title, text in titles_and_descriptions
    ]
    await sync_to_async(vocabulary.refresh)()
    return [listing.pk for listing in made]


def question(text: str) -> Query:
    return parse_query(text, "10")


async def test_a_question_no_listing_answers_in_full_finds_the_listings_matching_its_rare_terms(
    postgres: PostgresLexicalSubject,
) -> None:
    common = [("Evening concert", "An evening of music in the hall.") for _ in range(6)]
    *concerts, organ, both = await make(
        *common,
        ("Organ recital", "Bach on the great organ."),
        ("Organ and choir", "An evening of organ music."),
    )
    found = await lexical_search(
        postgres.index, question("which evening has organ music tonight"), 10, BUDGET_MS
    )
    ids = [c.listing_id for c in found]
    # No listing holds "tonight": every match is partial. The listing with the rare term
    # and most others comes first, the rare term alone beats the common ones together.
    assert ids[0] == both
    assert ids.index(organ) < min(ids.index(c) for c in concerts)
    assert set(ids) == {*concerts, organ, both}


async def test_a_listing_matching_every_term_outranks_partial_matches_of_common_terms(
    postgres: PostgresLexicalSubject,
) -> None:
    partial = await make(*[("Jazz organ trio", "Rare jazz organ grooves.")] * 3)
    (complete,) = await make(("Jazz night", "A jazz quartet at the bar."))
    found = await lexical_search(postgres.index, question("jazz quartet"), 10, BUDGET_MS)
    assert found[0].listing_id == complete
    assert {c.listing_id for c in found[1:]} == set(partial)


@pytest.mark.parametrize("text", ['"organ music"', "organ -choir"])
async def test_a_phrase_or_a_negation_is_never_relaxed_to_any_term(
    postgres: PostgresLexicalSubject, text: str
) -> None:
    await make(("Organ and choir", "Choral evensong with organ."), ("Music night", "Music."))
    found = await lexical_search(postgres.index, question(text), 10, BUDGET_MS)
    assert found == []


async def test_a_question_with_a_negation_is_relaxed_but_never_to_the_negated_word(
    postgres: PostgresLexicalSubject,
) -> None:
    organ, _ = await make(
        ("Organ recital", "Bach on the organ."), ("Organ and choir", "Evensong with choir.")
    )
    found = await lexical_search(
        postgres.index, question("where can i hear organ music -choir"), 10, BUDGET_MS
    )
    # No listing has every word ("hear"): partial matches answer, bar any with "choir".
    assert [c.listing_id for c in found] == [organ]


async def test_each_audience_weighs_terms_by_its_own_listings(
    postgres: PostgresLexicalSubject,
) -> None:
    # Publicly "organ" is rare and "evening" common; a judged collection full of organs
    # must not make "organ" weigh less in a public search.
    await make(*[("Organ works", "Organ.")] * 8, audience=Audience.of_evaluation_set("organs"))
    organ, *_ = await make(("Organ recital", "Organ."), *[("Evening walk", "An evening.")] * 5)
    found = await lexical_search(postgres.index, question("organ evening"), 10, BUDGET_MS)
    assert found[0].listing_id == organ
