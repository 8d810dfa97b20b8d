"""Searches read from a streaming replica (issue 36), a real one: a base backup of the
session's embedded server, replaying its WAL on a socket of its own.

A search reads the replica while it is close enough behind, and the primary otherwise,
saying why (`replica_lagging`, `replica_unavailable`); a generation is searched on the
replica only once the replica has replayed its activation; a frozen replica costs no
answer its deadline; and a search in flight on the replica survives the replay of a
change that would conflict with it."""

import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from asgiref.sync import sync_to_async
from django.db import transaction
from django.test import AsyncClient
from django.urls import reverse
from django.utils import timezone
from pytest_django.fixtures import Settings

from ingestion.models import Listing
from ingestion.upsert import apply_draft
from retrieval import service
from retrieval.pg import route
from retrieval.pg.route import Server
from retrieval.warming.warm_up import warm_up_this_loop
from searchsite import embedded
from searchsite.embedded import postgres
from searchsite.embedded import replica as embedded_replica
from tests.admin_pages import EDITORS, listing_change_form, make_roles, member_of
from tests.conftest import PATIENT_VECTOR_BUDGET_MS, eventually, first_search_answered
from tests.factories import draft, source
from tests.private_services import PrivatePostgres, streaming_replica
from tests.scraping import Scrape, scrape
from tests.search_fixtures import about_results, new_active_generation, search_json

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

REPLAY_TIMEOUT_S = 20.0
NEW_TITLE = "Harpsichord evening"


@pytest.fixture(scope="module")
def replica(django_db_setup: None) -> Iterator[PrivatePostgres]:
    """A streaming replica of the session's embedded server, for this module's tests (in
    the session's run directory, which the server's own user may enter)."""
    primary = embedded.pgdata_dir(embedded.run_dir())
    if not postgres.is_running(primary):
        pytest.skip("a replica is made from the embedded server's data directory (DATABASE_URL)")
    base = Path(tempfile.mkdtemp(prefix="replica-", dir=embedded.run_dir()))
    base.chmod(0o755)
    try:
        with streaming_replica(primary, base) as server:
            yield server
    finally:
        shutil.rmtree(base, ignore_errors=True)


@dataclass(frozen=True)
class Replicated:
    """A test's search client, the replica its searches may read, and the primary."""

    client: AsyncClient
    replica: PrivatePostgres
    primary: str  # the test database's URL

    async def replayed(self) -> None:
        await _replayed(self.primary, self.replica)

    async def reading(self) -> dict[str, Any]:
        """Once the replica has replayed the listings, and the process warmed up, the
        first answer read from the replica."""
        await self.replayed()
        await first_search_answered(self.client)
        return await _read_from_replica(self.client)


@pytest.fixture
def replicated(
    async_client: AsyncClient,
    indexed_listings: None,
    reading_replica: PrivatePostgres,
    test_database_url: str,
) -> Replicated:
    return Replicated(async_client, reading_replica, test_database_url)


@pytest.fixture
def reading_replica(
    replica: PrivatePostgres, settings: Settings, patient_search: None
) -> PrivatePostgres:
    """Searches may read `replica`, checked often (a test waits for checks, not for time),
    and have the time to: a replica given up on for a statement slow by chance on a loaded
    machine is not what these tests are about (but for the frozen replica's)."""
    settings.SEARCH_REPLICA_URLS = replica.url
    settings.SEARCH_REPLICA_CHECK_S = 0.05
    # Paused replays below are not lag enough to skip the replica (but where a test says).
    settings.SEARCH_REPLICA_MAX_LAG_S = 600.0
    settings.SEARCH_REPLICA_PATIENCE_MS = PATIENT_VECTOR_BUDGET_MS
    settings.SEARCH_REPLICA_CHECK_TIMEOUT_MS = PATIENT_VECTOR_BUDGET_MS
    service.forget_wiring()
    return replica


def _replica_conninfo(replica: PrivatePostgres) -> str:
    return route.conninfo(Server("replica-1", replica.url), "test-replica-reads")


def _position(conninfo: str, statement: str) -> int:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        row = conn.execute(statement).fetchone()
    assert row is not None
    return int(row[0])


async def _replayed(primary: str, replica: PrivatePostgres) -> None:
    """Wait (bounded) until the replica has replayed everything the primary wrote so far."""
    written = await sync_to_async(_position)(
        primary, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint"
    )

    async def caught_up() -> bool:
        replayed = await sync_to_async(_position)(
            _replica_conninfo(replica),
            "SELECT pg_wal_lsn_diff(pg_last_wal_replay_lsn(), '0/0')::bigint",
        )
        return replayed >= written

    await eventually(caught_up, REPLAY_TIMEOUT_S, "the replica to replay the primary's WAL")


def _on_replica(replica: PrivatePostgres, statement: str) -> None:
    with psycopg.connect(_replica_conninfo(replica), autocommit=True) as conn:
        conn.execute(statement)


@transaction.atomic
def _add_listing() -> None:
    feed = source("Venue calendar")
    apply_draft(feed, draft("new", title=NEW_TITLE, starts_at=None), timezone.now())


async def _search(client: AsyncClient, q: str) -> dict[str, Any]:
    return await search_json(client, q=q)


async def _read_from_replica(client: AsyncClient, q: str = "jazz") -> dict[str, Any]:
    """Search until one reads the replica (bounded): a process routes a search there once
    a check has seen the replica close enough behind."""
    answers: list[dict[str, Any]] = []

    async def on_replica() -> bool:
        answers.append(await _search(client, q))
        return not about_results(answers[-1]["reasons"])

    await eventually(on_replica, 10, "a search read from the replica")
    return answers[-1]


def _titles(body: dict[str, Any]) -> list[str]:
    return [result["title"] for result in body["results"]]


async def test_a_search_reads_the_replica_and_finds_what_it_has_replayed(
    replicated: Replicated,
) -> None:
    assert "Jazz quartet at the riverside" in _titles(await replicated.reading())

    await sync_to_async(_on_replica)(replicated.replica, "SELECT pg_wal_replay_pause()")
    try:
        await sync_to_async(_add_listing)()
        assert await sync_to_async(Listing.objects.filter(title=NEW_TITLE).exists)()
        body = await _search(replicated.client, "harpsichord")
        # Read from the replica, which has not replayed the new listing yet.
        assert about_results(body["reasons"]) == []
        assert NEW_TITLE not in _titles(body)
    finally:
        await sync_to_async(_on_replica)(replicated.replica, "SELECT pg_wal_replay_resume()")
    await replicated.replayed()
    body = await _search(replicated.client, "harpsichord")
    assert about_results(body["reasons"]) == []
    assert NEW_TITLE in _titles(body)


async def test_replica_lagging_a_replica_further_behind_than_its_bound_is_skipped(
    replicated: Replicated, settings: Settings
) -> None:
    settings.SEARCH_REPLICA_MAX_LAG_S = 0.5  # before the first search: its replicas' bound
    await replicated.reading()
    # Every transaction replayed an hour after its commit: the replica stops at the next.
    await sync_to_async(_apply_delay)(replicated.replica, "1h")
    try:
        await sync_to_async(_add_listing)()
        answers: list[dict[str, Any]] = []

        async def on_primary() -> bool:
            answers.append(await _search(replicated.client, "harpsichord"))
            return bool(about_results(answers[-1]["reasons"]))

        await eventually(on_primary, 10, "a search to skip the lagging replica")
        assert about_results(answers[-1]["reasons"]) == ["replica_lagging"]
        assert NEW_TITLE in _titles(answers[-1])  # read from the primary
        assert answers[-1]["degraded"] is False
        before = await scrape(replicated.client)
        await _search(replicated.client, "harpsichord")
        after = await scrape(replicated.client)
        assert after.since(before, "retrieval_reads_total", server="primary") == 1
        reason = "replica_lagging"
        assert after.since(before, "retrieval_degradation_reasons_total", reason=reason) == 1
    finally:
        await sync_to_async(_apply_delay)(replicated.replica, "0")
    await replicated.replayed()
    assert NEW_TITLE in _titles(await _read_from_replica(replicated.client, "harpsichord"))


def _apply_delay(replica: PrivatePostgres, delay: str) -> None:
    with psycopg.connect(_replica_conninfo(replica), autocommit=True) as conn:
        conn.execute(f"ALTER SYSTEM SET recovery_min_apply_delay = '{delay}'")
        conn.execute("SELECT pg_reload_conf()")


async def test_a_generation_is_searched_on_the_replica_only_once_it_has_replayed_it(
    replicated: Replicated,
) -> None:
    before = (await replicated.reading())["index_generation"]
    await sync_to_async(_on_replica)(replicated.replica, "SELECT pg_wal_replay_pause()")
    try:
        activated = await sync_to_async(new_active_generation)()
        service.forget_searchable_generation()
        assert (await _read_from_replica(replicated.client))["index_generation"] == before
    finally:
        await sync_to_async(_on_replica)(replicated.replica, "SELECT pg_wal_replay_resume()")
    await replicated.replayed()
    service.forget_searchable_generation()
    assert (await _read_from_replica(replicated.client))["index_generation"] == activated


async def test_a_search_on_the_replica_survives_the_replay_of_a_conflicting_lock(
    replicated: Replicated,
) -> None:
    """max_standby_streaming_delay: an exclusive lock taken on the primary, replayed while
    a search on the replica reads that table, waits for the search (up to a second, past
    any search's deadline) instead of cancelling it ("conflict with recovery")."""
    await replicated.replayed()
    replica = _replica_conninfo(replicated.replica)
    conflicts = await sync_to_async(_position)(replica, _LOCK_CONFLICTS)
    searching = await _reading_listings(replica, for_s=0.5)
    await sync_to_async(_lock_exclusively)(replicated.primary)
    assert await searching == [(5,)]
    await replicated.replayed()
    assert await sync_to_async(_position)(replica, _LOCK_CONFLICTS) == conflicts


# Queries the replica has cancelled in lock conflicts with its replay, ever (the module's
# replica is shared: the next test adds one).
_LOCK_CONFLICTS = (
    "SELECT confl_lock FROM pg_stat_database_conflicts WHERE datname = current_database()"
)


# Far above max_standby_streaming_delay's 1 s, far below Postgres's default of 30 s.
REPLAY_HELD_AT_MOST_S = 10.0


async def test_the_replay_of_a_conflicting_lock_waits_for_a_long_query_a_second_at_most(
    replicated: Replicated,
) -> None:
    """max_standby_streaming_delay's other side: a query on the replica longer than any
    search (an operator's) holds the replay of a conflicting lock back about a second, not
    for as long as it runs: it is cancelled, and the replica replays on."""
    await replicated.replayed()
    replica = _replica_conninfo(replicated.replica)
    long_read = await _reading_listings(replica, for_s=60.0)
    started = time.monotonic()
    await sync_to_async(_lock_exclusively)(replicated.primary)
    with pytest.raises(psycopg.errors.SerializationFailure, match="conflict with recovery"):
        await long_read
    await replicated.replayed()
    assert time.monotonic() - started < REPLAY_HELD_AT_MOST_S


async def _reading_listings(replica: str, for_s: float) -> "asyncio.Future[list[Any]]":
    """A query on the replica that reads the listings for `for_s`, once it holds its lock
    on them (bounded wait)."""
    reading = asyncio.ensure_future(
        sync_to_async(_rows, thread_sensitive=False)(
            replica, f"SELECT count(*) FROM ingestion_listing, pg_sleep({for_s})"
        )
    )

    async def holding() -> bool:
        return (
            await sync_to_async(_position)(
                replica,
                "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation"
                " WHERE c.relname = 'ingestion_listing' AND l.granted"
                " AND l.pid <> pg_backend_pid()",
            )
            > 0
        )

    await eventually(holding, REPLAY_TIMEOUT_S, "the query on the replica to hold its lock")
    return reading


def _lock_exclusively(primary: str) -> None:
    with psycopg.connect(primary) as conn:
        conn.execute("LOCK TABLE ingestion_listing IN ACCESS EXCLUSIVE MODE")
        conn.commit()


async def test_the_primary_keeps_the_rows_a_search_on_the_replica_still_reads(
    replicated: Replicated,
) -> None:
    """hot_standby_feedback: while a search on the replica holds a snapshot, a vacuum on
    the primary leaves the row versions that snapshot reads, so replaying it cannot
    cancel the search."""
    await replicated.replayed()
    with psycopg.connect(_replica_conninfo(replicated.replica)) as searching:
        searching.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        seen = searching.execute("SELECT count(*) FROM ingestion_listing").fetchone()
        await _feedback_reached_the_primary(replicated.primary)
        kept = await sync_to_async(_update_and_vacuum)(replicated.primary)
        assert kept == 5  # every old version, still read by the replica's snapshot
        await replicated.replayed()
        assert searching.execute("SELECT count(*) FROM ingestion_listing").fetchone() == seen
        searching.rollback()


async def _feedback_reached_the_primary(primary: str) -> None:
    """The replica has told the primary how old a snapshot it still reads (its xmin)."""

    async def told() -> bool:
        return (
            await sync_to_async(_position)(
                primary,
                "SELECT count(*) FROM pg_stat_replication WHERE backend_xmin IS NOT NULL",
            )
            > 0
        )

    await eventually(told, REPLAY_TIMEOUT_S, "the replica's feedback to reach the primary")


_NOT_REMOVABLE = re.compile(r"(\d+) are dead but not yet removable")


def _update_and_vacuum(primary: str) -> int:
    """Every listing's row updated, then the table vacuumed: how many dead row versions
    the vacuum had to leave."""
    details: list[str] = []
    with psycopg.connect(primary, autocommit=True) as conn:
        conn.add_notice_handler(lambda notice: details.append(notice.message_primary or ""))
        conn.execute("UPDATE ingestion_listing SET title = title")
        conn.execute("VACUUM (VERBOSE) ingestion_listing")
    found = [int(m.group(1)) for d in details if (m := _NOT_REMOVABLE.search(d))]
    assert found, details
    return found[0]


def _rows(url: str, sql: str) -> list[Any]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql).fetchall()


# The deadline of the frozen-replica test's searches, as the fault tests give theirs
# (tests/private_services.py, FAULT_SETTINGS): room for a loaded machine's stages.
FROZEN_DEADLINE_MS = 1000.0
LATE_BY_S = 0.050  # the allowance past the deadline
SEARCH_EVERY_S = 0.05
BEFORE_S, FROZEN_S = 1.0, 2.0


async def test_replica_unavailable_a_frozen_replica_costs_no_search_its_deadline(
    replicated: Replicated, settings: Settings
) -> None:
    settings.SEARCH_DEADLINE_MS = FROZEN_DEADLINE_MS
    settings.SEARCH_CALLER_TIMEOUT_CAP_MS = FROZEN_DEADLINE_MS
    settings.SEARCH_VECTOR_BUDGET_MS = 600.0
    settings.SEARCH_REPLICA_PATIENCE_MS = 200.0
    settings.SEARCH_REPLICA_CHECK_TIMEOUT_MS = 200.0
    await replicated.reading()

    async def one(q: str) -> tuple[float, int, list[str]]:
        """(seconds taken, status, reasons)"""
        started = time.monotonic()
        response = await replicated.client.get("/api/search", {"q": q})
        reasons = response.json().get("reasons", []) if response.status_code < 500 else []
        return time.monotonic() - started, response.status_code, reasons

    async def searches_for(seconds: float) -> list[tuple[float, int, list[str]]]:
        queries = ("jazz", "organ recital", "baking class", "science fair")
        running = []
        for number in range(round(seconds / SEARCH_EVERY_S)):
            running.append(asyncio.ensure_future(one(queries[number % len(queries)])))
            await asyncio.sleep(SEARCH_EVERY_S)  # the load's pace, not a wait for an outcome
        return list(await asyncio.gather(*running))

    # Only the frozen window's answers are compared with its counters: a search before
    # it may be degraded too (a check past its 200 ms on a loaded machine), and is
    # counted before the first scrape.
    await searches_for(BEFORE_S)
    before = await scrape(replicated.client)
    with replicated.replica.frozen():
        during = await searches_for(FROZEN_S)
    after = await scrape(replicated.client)
    await _read_from_replica(replicated.client)  # read again after the thaw (bounded)

    late = [a for a in during if a[0] > FROZEN_DEADLINE_MS / 1000 + LATE_BY_S]
    assert not late, late
    assert all(status == 200 for _, status, _ in during), during
    unavailable = sum("replica_unavailable" in reasons for _, _, reasons in during)
    assert unavailable > 0, during
    reason = "replica_unavailable"
    assert after.since(before, "retrieval_degradation_reasons_total", reason=reason) == unavailable
    failed = _failed_on_replica(after, before)
    assert failed > 0


async def test_replica_unavailable_a_replica_that_keeps_failing_is_cut_off_by_its_breaker(
    replicated: Replicated, settings: Settings
) -> None:
    """A replica whose statements keep failing (here none is answered within a patience
    too short for any) is tried until its breaker has seen REPLICA_BREAKER_MIN_CALLS of
    them fail, and then no more: the searches after read the primary at once, saying so."""
    await replicated.reading()
    settings.SEARCH_REPLICA_PATIENCE_MS = 0.001
    settings.REPLICA_BREAKER_MIN_CALLS = 5
    settings.REPLICA_BREAKER_FAILURE_RATIO = 0.5
    settings.REPLICA_BREAKER_WINDOW_S = 600.0
    settings.REPLICA_BREAKER_COOLDOWN_S = 600.0  # not half-open again within the test
    service.forget_wiring()  # the replicas' breaker policy is read as they are made
    before = await scrape(replicated.client)

    async def tried(at_least: float) -> bool:
        body = await _search(replicated.client, "jazz")
        assert "replica_unavailable" in about_results(body["reasons"]), body["reasons"]
        return await failed_on_replica() >= at_least

    async def failed_on_replica() -> float:
        return _failed_on_replica(await scrape(replicated.client), before)

    await eventually(lambda: tried(5), REPLAY_TIMEOUT_S, "five statements failed on the replica")
    cut_off_after = await failed_on_replica()
    for _ in range(10):
        assert not await tried(cut_off_after + 1)
    assert await failed_on_replica() == cut_off_after


async def test_an_editors_saved_change_is_found_by_that_editor_at_once(
    replicated: Replicated,
) -> None:
    """The editor's change is on the primary and not yet replayed: their own searches read
    the primary (the cookie their save left says how far the replica must have come),
    while everyone else's go on reading the replica."""
    await replicated.reading()
    await sync_to_async(make_roles)()
    editor = AsyncClient()
    await editor.aforce_login(await sync_to_async(member_of)(EDITORS))
    listing = await sync_to_async(Listing.objects.get)(title="Organ recital")
    form = await sync_to_async(listing_change_form)(listing, title=NEW_TITLE)
    await sync_to_async(_on_replica)(replicated.replica, "SELECT pg_wal_replay_pause()")
    try:
        change = reverse("admin:ingestion_listing_change", args=[listing.pk])
        saved = await editor.post(change, form)
        assert saved.status_code == 302, saved.content
        theirs = await _search(editor, "harpsichord")
        assert (about_results(theirs["reasons"]), _titles(theirs)[:1]) == (
            ["replica_lagging"],
            [NEW_TITLE],
        )
        others = await _search(replicated.client, "harpsichord")
        assert about_results(others["reasons"]) == []
        assert NEW_TITLE not in _titles(others)
    finally:
        await sync_to_async(_on_replica)(replicated.replica, "SELECT pg_wal_replay_resume()")
    await replicated.replayed()
    assert NEW_TITLE in _titles(await _read_from_replica(editor, "harpsichord"))


def test_make_runs_replicas_are_started_stopped_and_printed_by_manage_py_services(
    django_db_setup: None, child_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `SEARCH_REPLICAS=1 make run` does (searchsite/supervisor.py), on the session's
    embedded server: a replica started, named in SEARCH_REPLICA_URLS for the processes
    started after, printed by `manage.py services` with its health, stopped at the end."""
    base = embedded.run_dir()
    if not postgres.is_running(embedded.pgdata_dir(base)):
        pytest.skip("a replica is made from the embedded server's data directory (DATABASE_URL)")
    monkeypatch.setenv("SEARCH_REPLICA_URLS", "")  # restored after the test
    services = embedded.EmbeddedServices(base)
    try:
        embedded.ensure_replicas(services, 1)
        urls = os.environ["SEARCH_REPLICA_URLS"]
        assert urls == embedded_replica.url(embedded.replica_dir(base, 1))
        printed = subprocess.run(
            [sys.executable, "manage.py", "services"],
            cwd=embedded.REPO_DIR,
            env=child_env | {"SEARCH_REPLICA_URLS": urls},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert printed.returncode == 0, printed.stderr
        assert f"SEARCH_REPLICA_URLS={urls}\n" in printed.stdout
        assert "replica-1: ok (replaying" in printed.stdout
    finally:
        services.stop()
        shutil.rmtree(base / "replicas", ignore_errors=True)
    assert not postgres.is_running(embedded.replica_dir(base, 1))


async def test_a_warmed_up_process_reads_the_replica_from_its_first_search(
    replicated: Replicated,
) -> None:
    """The warm-up checks the replicas (and runs its searches on them): without it, a
    process's first searches read the primary, no check having answered yet."""
    await replicated.replayed()
    assert await warm_up_this_loop()
    body = await _search(replicated.client, "jazz")
    assert about_results(body["reasons"]) == []


def _failed_on_replica(after: Scrape, before: Scrape) -> float:
    """Statements given up on a replica between the two scrapes, late or in error."""
    return sum(
        after.total_since(before, "retrieval_replica_statements_total", outcome=outcome)
        for outcome in ("late", "error")
    )
