"""Finding the listings still to embed never reads the embeddings' rows, nor every listing.

The rows are mostly their vector (469 MB at 100,000 listings). Reading them whole for the
embedding lag, which every /metrics scrape and /healthz asks for, and for every claim of
the embedding worker took 250 ms on three processes each time and turned a load bench's
scrapes into the largest load on the machine (docs/reliability.md). Each statement must
find the pending pairs in the covering index (migration 0011) instead, and look only at
the embedding candidates."""

import json
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from ingestion.batches import apply_parse_result
from ingestion.dedup import _CANDIDATES_BY_TIME, _CANDIDATES_UNDATED
from ingestion.drafts import ParseResult
from ingestion.embedding import DIMENSIONS, MODEL_NAME
from ingestion.embedding_claim import BACKFILL_CLAIM_SQL, CLAIM_SQL, SETTLE_STORED, claim_params
from ingestion.embedding_lag import PENDING_SQL
from ingestion.generations import TEXT_PIPELINE_VERSION
from ingestion.indexing import settle_candidates
from ingestion.models import IndexGeneration, Listing
from tests.factories import draft, source
from tests.plans import nodes
from tests.search_fixtures import index_listings

pytestmark = pytest.mark.django_db
EMBEDDINGS = "ingestion_listing_embedding"
CLAIM_PARAMS = claim_params(128)
WALKS = 600  # a few pages of listings: on one, every plan costs about the same


def _plan(statement: str, params: Any, *, seqscan: bool = True) -> dict[str, Any]:
    """The plan of `statement`, as EXPLAIN's JSON; `seqscan=False` prices sequential
    scans out."""
    with transaction.atomic(), connection.cursor() as cursor:
        if not seqscan:
            cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN (FORMAT JSON) {statement}", params)
        (document,) = cursor.fetchone()
    (top,) = json.loads(document) if isinstance(document, str) else document
    plan: dict[str, Any] = top["Plan"]
    return plan


def _run(statement: str, params: Any) -> dict[str, Any]:
    """The plan of `statement` as it ran (EXPLAIN ANALYZE, BUFFERS), rolled back: a
    claim's advisory locks and a settle's deletes are not kept."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {statement}", params)
        (document,) = cursor.fetchone()
        transaction.set_rollback(True)
    (top,) = json.loads(document) if isinstance(document, str) else document
    plan: dict[str, Any] = top["Plan"]
    return plan


def _buffers(plan: dict[str, Any]) -> int:
    """The pages a plan that ran read, from the cache or not."""
    return int(plan["Shared Hit Blocks"] + plan["Shared Read Blocks"])


def _scans_of(table: str, statement: str, params: Any) -> list[str]:
    """How the plan of `statement` reads `table`: one node type per scan of it. The test's
    tables are a few rows: left to itself the planner reads them whole whatever indexes
    there are. With sequential scans priced out, the plan shows which index can answer,
    and whether it can answer without the table's rows."""
    plan = _plan(statement, params, seqscan=False)
    return [node["Node Type"] for node in nodes(plan) if node.get("Relation Name") == table]


def test_the_embedding_lag_reads_only_the_covering_index() -> None:
    index_listings()
    assert _scans_of(EMBEDDINGS, PENDING_SQL, []) == ["Index Only Scan"]


def test_a_claim_reads_only_the_covering_index() -> None:
    index_listings()
    assert _scans_of(EMBEDDINGS, CLAIM_SQL, CLAIM_PARAMS) == ["Index Only Scan"]


@pytest.mark.parametrize(
    ("statement", "params"),
    [(PENDING_SQL, []), (CLAIM_SQL, CLAIM_PARAMS)],
    ids=["lag", "claim"],
)
@pytest.mark.django_db(transaction=True)  # VACUUM runs outside a transaction
def test_the_pending_pairs_are_found_among_the_candidates_not_every_listing(
    statement: str, params: Any
) -> None:
    """With 50,000 listings embedded and one changed, the work is one listing. Reading
    both covering indexes whole to find it cost 32 ms of Postgres for every claim at
    100,000 listings, 4.6 ms for each listing a feed brought (ingestion/pending.py)."""
    _many_listings_embedded(50_000)
    settle_candidates()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ingestion_embedding_candidate")  # as autovacuum will
    Listing.objects.filter(pk=Listing.objects.order_by("pk").values("pk")[:1]).update(
        content_version=2
    )
    plan = _run(statement, params)
    assert plan["Actual Rows"] == 1
    # One listing's rows and index entries, the generations and the candidates: tens of
    # pages. The two covering indexes alone are over 300 at 50,000 listings.
    assert _buffers(plan) < 100


def test_settling_a_claims_listings_reads_only_theirs() -> None:
    """With 50,000 candidates (every listing of a generation being built is one), a claim
    that stored one listing's vectors settles that listing alone: one candidate's key,
    not one probe of every candidate for each listing stored (a pass over all 50,000 for
    each of a claim's 128, planned on the fenced lookup of ingestion/pending.py)."""
    _many_listings_embedded(50_000)
    first = Listing.objects.order_by("pk").values_list("pk", flat=True)[0]
    assert _buffers(_run(SETTLE_STORED, [[first]])) < 100


@pytest.mark.django_db(transaction=True)  # VACUUM runs outside a transaction
def test_a_claim_while_a_generation_is_built_reads_a_batch_not_the_generation() -> None:
    """A generation created over 50,000 listings makes 50,000 candidates. Sorting them all
    for each claim of 128 read 1.2 million buffers (370 ms) at 100,000 listings, for
    every claim of the build, and each read of the lag 600,000 (230 ms)
    (migrations/0013)."""
    _many_listings_embedded(50_000)
    settle_candidates()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ingestion_embedding_candidate")  # as autovacuum will
    IndexGeneration.objects.create(
        embedding_model=MODEL_NAME,
        dimensions=DIMENSIONS,
        text_pipeline_version=TEXT_PIPELINE_VERSION,
        state=IndexGeneration.State.BUILDING,
    )
    # The written listings' claim and the lag (of the active generation) pass over the
    # backfill without a probe: at most one read of the candidates (639 pages here while
    # their statistics predate the backfill, 3 once analysed), where a probe of each read
    # 300,000.
    written = _run(CLAIM_SQL, CLAIM_PARAMS)
    assert written["Actual Rows"] == 0
    assert _buffers(written) < 2_000
    assert _buffers(_run(PENDING_SQL, [])) < 2_000
    backfill = _run(BACKFILL_CLAIM_SQL, CLAIM_PARAMS)
    assert backfill["Actual Rows"] == 128
    # A window of eight claims' candidates (1,024), each looked up in the generation being
    # built: about 6.5 pages each (6,686 in all at 100,000 listings).
    assert _buffers(backfill) < 1_024 * 10


def _many_listings_embedded(count: int) -> None:
    """`count` active listings, each embedded in an active generation, and the statistics
    of tables that size: the planner's choice between the two joins depends on them. The
    vectors are of 3 dimensions, in a generation without an HNSW index (only
    `generations.create_generation` makes one), so the rows are cheap to make."""
    generation = IndexGeneration.objects.create(
        embedding_model=MODEL_NAME,
        dimensions=DIMENSIONS,
        text_pipeline_version=TEXT_PIPELINE_VERSION,
        state=IndexGeneration.State.ACTIVE,
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO ingestion_listing (title, description, venue, aliases, timezone,"
            " all_day, url, status, created_at, updated_at, content_version, fetched_kind,"
            " audience, withdrawn_by_editor, source_kinds)"
            " SELECT 'Listing ' || n, '', '', '{}', '', false, '', 'active', now(), now(), 1,"
            " 'feed', 'public', false, '{}' FROM generate_series(1, %s) AS n",
            [count],
        )
        cursor.execute(
            "INSERT INTO ingestion_listing_embedding"
            " (listing_id, generation_id, embedding, content_version, embedded_at)"
            " SELECT id, %s, '[1,0,0]', 1, now() FROM ingestion_listing",
            [generation.pk],
        )
        cursor.execute("ANALYZE ingestion_listing")
        cursor.execute("ANALYZE ingestion_listing_embedding")
        # The listings' triggers made as many candidates. Left with the statistics of an
        # earlier test's few rows, the settle that follows was planned as a nested loop of
        # scans and ran for minutes (CI, after tests that leave 40 or 250).
        cursor.execute("ANALYZE ingestion_embedding_candidate")


def _indexes_of(table: str, statement: str, params: dict[str, Any]) -> list[str]:
    """The indexes the plan of `statement` reads `table` through (a bitmap scan's
    included), or the scan's node type where it reads none."""
    found = []
    for node in nodes(_plan(statement, params)):
        if node.get("Relation Name") != table:
            continue
        # A bitmap scan's index is its child; a subquery run per row is another scan.
        own = [n for n in node.get("Plans", []) if n.get("Parent Relationship") != "SubPlan"]
        names = [n["Index Name"] for n in [node, *own] if "Index Name" in n]
        found.extend(names or [node["Node Type"]])
    return found


def test_undated_drafts_find_their_candidates_by_normalised_title(
    django_capture_on_commit_callbacks: Any,
) -> None:
    """A first import is planned on statistics of the size it has, not of an empty table:
    without them the undated de-duplication lookup was planned on an index that read
    every active listing for each draft (687 ms for a batch of 128 where the
    normalised-title index took 1.3 ms, three quarters of a poll)."""
    with connection.cursor() as cursor:
        # Statistics of an empty table, whatever tests before this one left.
        cursor.execute("ANALYZE ingestion_listing")
    feed = source()
    walks = [draft(f"id-{n}", title=f"Walk {n}", starts_at=None) for n in range(WALKS)]
    with django_capture_on_commit_callbacks(execute=True):
        apply_parse_result(
            feed, ParseResult(drafts=walks), fetched_at=timezone.now(), started_at=timezone.now()
        )
    params = {
        "source_id": source(name="other").pk,
        "audience": "public",
        "n": [0],
        "title": ["Walk 7"],
        "venue": [""],
    }
    found = _indexes_of("ingestion_listing", _CANDIDATES_UNDATED, params)
    assert found == ["listing_undated_title"]


def test_dated_drafts_look_up_their_candidates_records_by_listing(
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Whether a candidate already has a record of the draft's source is looked up for
    that candidate, through the records' listing index, whatever the records' statistics
    say. As an anti join planned on a new source's statistics it read every record of the
    source once per draft: a burst's later payloads took 440 ms for 250 drafts against
    31 ms."""
    with connection.cursor() as cursor:
        # Statistics of empty tables, whatever tests before this one left.
        cursor.execute("ANALYZE ingestion_listing")
        cursor.execute("ANALYZE ingestion_sourcerecord")
    calendar = source()
    starts = timezone.now()
    walks = [draft(f"id-{n}", title=f"Walk {n}", starts_at=starts) for n in range(WALKS)]
    with django_capture_on_commit_callbacks(execute=True):
        apply_parse_result(
            calendar,
            ParseResult(drafts=walks),
            fetched_at=timezone.now(),
            started_at=timezone.now(),
        )
    params = {
        "source_id": calendar.pk,
        "audience": "public",
        "n": [0],
        "title": ["Walk 7"],
        "venue": [""],
        "earliest": [starts],
        "latest": [starts],
    }
    found = _indexes_of("ingestion_sourcerecord", _CANDIDATES_BY_TIME, params)
    assert found
    assert all("listing_id" in name for name in found), found
