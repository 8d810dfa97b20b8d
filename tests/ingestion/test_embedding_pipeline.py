"""The embedding sweep keeps the model busy while the database works: the next claim is
made while the model embeds, two sweeps never embed the same pair, and a claim the model
never finished is left, whole, to the next sweep. The model is a fake here: what is under
test is the order of the work around it."""

import threading
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt
import psycopg
import pytest
from django.conf import settings
from django.db import connection, connections, transaction
from django.utils import timezone

from ingestion import generations, indexing
from ingestion.batches import apply_parse_result
from ingestion.drafts import ParseResult
from ingestion.embedding import DIMENSIONS, MODEL_NAME, Embedder
from ingestion.embedding_claim import CLAIM_LOCK_SPACE
from ingestion.indexing import embed_pending, pending_count
from ingestion.models import Listing, ListingEmbedding
from ingestion.upsert import apply_draft
from tests.conftest import run_together
from tests.factories import FakeClock, draft, source

pytestmark = pytest.mark.django_db(transaction=True)  # the sweep's lanes connect on their own
LISTINGS = 6
FOREVER = float("inf")


class FakeEncoder:
    """Unit vectors, one per text; `on_encode` runs first, given how many texts it has been
    asked for so far, this call's included."""

    def __init__(self, on_encode: Callable[[int], None] = lambda texts: None) -> None:
        self.texts: list[str] = []
        self._on_encode = on_encode
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        with self._lock:
            self.texts.extend(texts)
            so_far = len(self.texts)
        self._on_encode(so_far)
        vectors = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        vectors[:, 0] = 1
        return vectors


@transaction.atomic
def _listings(count: int) -> None:
    feed = source()
    for number in range(count):
        apply_draft(feed, draft(f"id-{number}", title=f"Recital {number}"), timezone.now())


@pytest.fixture
def generation() -> int:
    return generations.ensure_active_generation(MODEL_NAME, DIMENSIONS).pk


def _second_claim_made(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """An event set once a sweep has made its second claim (the one made ahead)."""
    made = threading.Event()
    claims = 0
    real_claim = indexing._claim_batch

    def counted_claim(size: int) -> list[indexing._Claim]:
        nonlocal claims
        claimed = real_claim(size)
        claims += 1
        if claims == 2:
            made.set()
        return claimed

    monkeypatch.setattr(indexing, "_claim_batch", counted_claim)
    return made


def test_the_next_claim_is_made_while_the_model_embeds(
    generation: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    _listings(LISTINGS)
    second_claim = _second_claim_made(monkeypatch)
    seen_while_embedding: list[bool] = []

    def first_batch_waits(texts: int) -> None:
        if texts <= 2:  # the first claim's batch: bounded, so a serial sweep fails, not hangs
            seen_while_embedding.append(second_claim.wait(timeout=5))

    encoder = FakeEncoder(first_batch_waits)
    assert embed_pending(FOREVER, batch_size=2, embedder=Embedder(encoder, "fake")) == LISTINGS
    assert seen_while_embedding == [True]
    assert pending_count(generation) == 0
    assert sorted(encoder.texts) == sorted(set(encoder.texts))


def test_a_claim_the_model_failed_on_is_left_whole_to_the_next_sweep(generation: int) -> None:
    _listings(LISTINGS)

    def fail_on_the_second_batch(texts: int) -> None:
        if texts > 2:
            raise RuntimeError("model crashed")

    with pytest.raises(RuntimeError, match="model crashed"):
        embed_pending(
            FOREVER, batch_size=2, embedder=Embedder(FakeEncoder(fail_on_the_second_batch), "fake")
        )
    # The first claim was stored; the one it failed on and the one claimed ahead were rolled
    # back, their locks released: the next sweep takes all of them, each exactly once.
    assert ListingEmbedding.objects.count() == 2
    assert pending_count(generation) == LISTINGS - 2
    encoder = FakeEncoder()
    assert embed_pending(FOREVER, batch_size=2, embedder=Embedder(encoder, "fake")) == LISTINGS - 2
    assert len(encoder.texts) == LISTINGS - 2
    assert pending_count(generation) == 0


def test_a_sweep_with_nothing_to_embed_loads_no_model(
    generation: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    loaded: list[bool] = []
    monkeypatch.setattr(indexing, "get_embedder", lambda: loaded.append(True))
    assert embed_pending(until=FOREVER) == 0
    assert loaded == []


def test_a_sweep_stops_claiming_when_its_time_is_up(generation: int) -> None:
    _listings(LISTINGS)
    clock = FakeClock()
    encoder = FakeEncoder(lambda texts: clock.advance(10))
    done = embed_pending(clock() + 5, batch_size=2, clock=clock, embedder=Embedder(encoder, "fake"))
    # The first claim's embedding used the time up: the claim made ahead of it is still
    # embedded (it was claimed in time), nothing after it is.
    assert done == len(encoder.texts) == 4
    assert pending_count(generation) == LISTINGS - 4


def test_two_sweeps_at_once_embed_every_pair_exactly_once(generation: int) -> None:
    _listings(30)
    encoders = [FakeEncoder(), FakeEncoder()]

    def sweep(encoder: FakeEncoder) -> Callable[[], None]:
        def run() -> None:
            try:
                embed_pending(FOREVER, batch_size=3, embedder=Embedder(encoder, "fake"))
            finally:
                connections.close_all()

        return run

    run_together([sweep(encoder) for encoder in encoders])
    embedded = Counter(text for encoder in encoders for text in encoder.texts)
    assert len(embedded) == 30
    assert set(embedded.values()) == {1}
    assert ListingEmbedding.objects.filter(generation_id=generation).count() == 30


def test_a_claim_locks_only_the_listings_it_takes(generation: int) -> None:
    _listings(LISTINGS)
    with transaction.atomic(), connection.cursor() as cursor:
        claims = indexing._claim_batch(2)
        cursor.execute(
            "SELECT objid FROM pg_locks WHERE locktype = 'advisory' AND classid = %s"
            " AND pid = pg_backend_pid()",
            [CLAIM_LOCK_SPACE],
        )
        held = sorted(row[0] for row in cursor.fetchall())
    assert held == sorted(claim.listing_id for claim in claims)
    assert len(held) == 2


def _changes_while_embedding(
    change: Callable[[], None], monkeypatch: pytest.MonkeyPatch
) -> FakeEncoder:
    """An encoder that, on its first batch, has `change` made and committed on this
    thread's connection, which waits for no lock longer than a bounded time: a claim
    holding the listing's row would fail it (the model waits for the change, the change
    for the claim) rather than hang it.

    The change waits for the claim the sweep makes ahead: made after the change, and
    after the first claim committed, that claim would find the changed listing pending
    and take it in the same sweep, so what one sweep embeds would depend on timing.

    The model runs on the sweep's own thread here, not on the idle-cores one: the change
    would otherwise leave that thread a connection of its own, open past the test."""
    monkeypatch.setattr(settings, "EMBED_IDLE_CLASS", False)
    ahead_claimed = _second_claim_made(monkeypatch)

    def once(texts: int) -> None:
        if texts == 1:
            assert ahead_claimed.wait(timeout=5), "the sweep made no claim ahead"
            with connection.cursor() as cursor:
                cursor.execute("SET lock_timeout = '2s'")
                try:
                    change()
                finally:
                    cursor.execute("RESET lock_timeout")

    return FakeEncoder(once)


def test_a_listing_changed_while_it_is_embedded_is_embedded_again(
    generation: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    feed = source()
    with transaction.atomic():
        apply_draft(feed, draft("id-0", title="Recital"), timezone.now())
    changed = ParseResult(drafts=[draft("id-0", title="Recital, moved to the crypt")])

    def repoll() -> None:
        apply_parse_result(feed, changed, fetched_at=timezone.now(), started_at=timezone.now())

    first = _changes_while_embedding(repoll, monkeypatch)
    assert embed_pending(FOREVER, batch_size=1, embedder=Embedder(first, "fake")) == 1
    # Stored with the version it was embedded from: the listing is pending again.
    assert pending_count(generation) == 1
    second = FakeEncoder()
    assert embed_pending(FOREVER, batch_size=1, embedder=Embedder(second, "fake")) == 1
    assert "crypt" not in first.texts[0]
    assert "crypt" in second.texts[0]
    assert pending_count(generation) == 0


def test_a_listing_withdrawn_while_it_is_embedded_gets_no_vector(
    generation: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    _listings(1)

    def withdraw() -> None:
        Listing.objects.update(status=Listing.Status.WITHDRAWN)

    encoder = _changes_while_embedding(withdraw, monkeypatch)
    assert embed_pending(FOREVER, batch_size=1, embedder=Embedder(encoder, "fake")) == 0
    assert len(encoder.texts) == 1
    assert not ListingEmbedding.objects.exists()


def test_a_repoll_of_unchanged_items_does_not_wait_on_the_listings_a_sweep_holds(
    test_database_url: str,
) -> None:
    feed = source()
    result = ParseResult(drafts=[draft(f"id-{n}", title=f"Recital {n}") for n in range(3)])
    apply_parse_result(feed, result, fetched_at=timezone.now(), started_at=timezone.now())
    with psycopg.connect(test_database_url) as sweep, connection.cursor() as cursor:
        sweep.execute("SELECT id FROM ingestion_listing FOR UPDATE").fetchall()  # as a claim
        cursor.execute("SET lock_timeout = '2s'")  # a wait fails the test, not hangs it
        try:
            again = apply_parse_result(
                feed, result, fetched_at=timezone.now(), started_at=timezone.now()
            )
        finally:
            cursor.execute("RESET lock_timeout")
    assert again.unchanged == 3


@pytest.mark.parametrize("keep", [True, False])
def test_a_workers_sweeps_keep_their_lanes_connections(
    generation: int, monkeypatch: pytest.MonkeyPatch, keep: bool
) -> None:
    """A trickle of listings queues a sweep for nearly every poll: a worker's sweeps claim
    on the two connections its lanes keep, not on two new ones each."""
    backends: list[int] = []
    real_claim = indexing._claim_batch

    def noted(size: int) -> list[indexing._Claim]:
        backends.append(connection.connection.info.backend_pid)  # the lane's own
        return real_claim(size)

    monkeypatch.setattr(indexing, "_claim_batch", noted)
    embedder = Embedder(FakeEncoder(), "fake")
    feed = source()
    for sweep in range(3):
        with transaction.atomic():
            for number in range(2):
                title = f"Recital {sweep}.{number}"
                apply_draft(feed, draft(f"{sweep}.{number}", title=title), timezone.now())
        assert embed_pending(FOREVER, batch_size=1, embedder=embedder, keep_lanes=keep) == 2
    assert len(backends) >= 9  # three claims a sweep at least: two stored, one finding none
    assert len(set(backends)) == (2 if keep else 6)
