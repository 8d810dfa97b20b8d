"""Embedding listings for every live generation: active, building, or ready (built, and
kept current so that it can be activated, or rolled back to, without falling behind).

Only generations of the model this process runs are embedded here. The work is the
data itself: an active listing without an embedding of its current content version in a
live generation of its audience needs one; the embedding candidates say which listings to
look at (ingestion/pending.py), and a claim that stores vectors drops the candidates that
want nothing more (`_settle_sql`; the statements are in ingestion/embedding_claim.py). A
claim takes a transaction-level advisory lock per listing, skipping those another claim
holds, so concurrent embedding workers never do the same work twice; and the upsert only
ever moves a vector forward in content version.

Invariants: a vector is stored with the content version it was embedded from, so a
listing that changed while the model embedded it stays pending and is embedded again;
a claim locks no listing row while the model works, so a poll that changes a listing
never waits for the model (with row locks it did, for a whole claim:
docs/decisions/embedding-claim-takes-advisory-locks.md);
the vectors are stored only for listings still active, locked `FOR SHARE` from the check
to the commit, so a listing withdrawn meanwhile (whose trigger deletes its vectors) is
never left with one. A worker killed at any point leaves its claims to the next sweep
with nothing half-written: a claim is one transaction. `embed_pending` keeps two claims
in flight, each in its own transaction on its own connection, so the model embeds one
while the other is written and the next is claimed.
"""

import dataclasses
import hashlib
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
from django.conf import settings
from django.db import close_old_connections, connection, connections, transaction
from django.utils import timezone
from pgvector import Vector

from ingestion import metrics
from ingestion.embedding import Embedder, get_embedder
from ingestion.embedding_claim import (
    BACKFILL_CLAIM_SQL,
    CLAIM_SQL,
    REUSABLE,
    SETTLE_ALL,
    SETTLE_STORED,
    STILL_PENDING,
    STORABLE,
    UPSERT,
    claim_params,
)
from ingestion.idle_cores import on_idle_cores
from ingestion.pacing import Pacer, sweep_pacer
from ingestion.pending import pending_from
from ingestion.text import embedding_text
from resilience.per_process import PerProcess

T = TypeVar("T")


@dataclass(frozen=True)
class _Claim:
    listing_id: int
    generation_id: int
    generation_state: str
    content_version: int
    text: str
    kind: str
    age_s: float | None
    # A vector the generation already has for this text (another listing's), if any.
    reused: np.ndarray | None = field(default=None, compare=False)

    @property
    def digest(self) -> bytes:
        return hashlib.sha256(self.text.encode()).digest()


def embed_pending_batch(batch_size: int | None = None) -> int:
    """Embed one claim of pending (listing, generation) pairs, EMBED_BATCH_SIZE (128) by
    default; returns how many. A large claim lets `embed_documents` sort it by length
    into its batches, which pads far less than batching in arrival order (111 against 184
    listings/s in bench/embed.py, batches of 32)."""
    with transaction.atomic():
        claims = _claim_batch(batch_size or settings.EMBED_BATCH_SIZE)
        if not claims:
            settle_candidates()
            return 0
        stored = _store(claims, _vectors(get_embedder(), claims))
    _record(stored)
    return len(stored)


def embed_pending(
    until: float,
    *,
    batch_size: int | None = None,
    clock: Callable[[], float] = time.monotonic,
    embedder: Embedder | None = None,
    pacer: Pacer | None = None,
    keep_lanes: bool = False,
) -> int:
    """Embed claims back to back until none is left or `clock()` passes `until`; returns
    how many pairs. The model never waits on the database: while it embeds one claim, the
    previous claim's vectors are written and committed and the next claim is made, on the
    other of two connections (a claim passes over the listings the claim being embedded
    holds). At most two claims are in flight; one that was claimed but not embedded when
    the loop stops, or when the model fails, is rolled back and left to the next sweep.

    The model is loaded only once there is a claim to embed: every worker asks for a sweep
    as it starts, and loading it for none took two seconds of a core just as a cold-started
    stack took its first searches (docs/reliability.md, cold start).

    The model's work and the vectors' writes go slice by slice, each when `pacer` (the web
    processes' search pressure, by default) lets it (ingestion/pacing.py). A worker's
    sweeps keep their lanes and connections (`keep_lanes`)."""
    size = batch_size or settings.EMBED_BATCH_SIZE
    pacer = pacer or sweep_pacer()
    done = 0
    with _lanes(keep_lanes) as lanes:
        flights = [lanes[0].submit(size, pacer)]  # the k-th claim submitted on lane k % 2
        previous: _InFlight | None = None  # given its vectors, perhaps not yet committed
        try:
            while claims := flights[-1].claimed.result():
                current = flights[-1]
                if clock() < until:
                    flights.append(lanes[len(flights) % 2].submit(size, pacer))
                model = embedder or get_embedder()
                current.embedded.set_result(_vectors(model, claims, pacer))
                if previous is not None:
                    done += _finish(previous)
                previous = current
                if flights[-1] is current:  # time is up: nothing claimed ahead
                    break
            if previous is not None:
                done += _finish(previous)
        finally:
            for flight in flights:
                flight.abandon()
    settle_candidates()
    return done


def _vectors(model: Embedder, claims: list["_Claim"], pacer: Pacer | None = None) -> np.ndarray:
    """The claims' vectors, in order: each text the generation has no vector for yet is
    embedded once, however many claims share it; the others are reused. Texts go to the
    model in slices of similar lengths (sorted first, so a slice pads no more than the
    whole claim would), each when `pacer` lets it, on cores searches leave idle
    (ingestion/idle_cores.py). The pacer counts listings, not texts: each listing's vector
    is a write on the graph searches read, however it was made; the listings whose vectors
    were reused are let through after the others, before their claim is written."""
    listings = Counter(c.text for c in claims if c.reused is None)
    texts = sorted(listings, key=len)
    made: dict[str, np.ndarray] = {}
    for part in _slices(texts):
        vectors = _embedded(model, part, sum(listings[text] for text in part), pacer)
        made.update(zip(part, vectors, strict=True))
    if pacer is not None and (reused := len(claims) - listings.total()):
        pacer.admit(reused)
    return np.stack([made[c.text] if c.reused is None else c.reused for c in claims])


def _embedded(model: Embedder, texts: list[str], listings: int, pacer: Pacer | None) -> np.ndarray:
    """`texts`' vectors, those of `listings` listings, when `pacer` lets them through. On
    idle cores the model takes only CPU that searches leave, and its time is charged at
    EMBED_IDLE_SHARE, not at the share slow searches shrink: idle cores are not free (the
    model there at half a core moved the p99 of searches beside it by +19 %, at a quarter
    by +2 %; docs/reliability.md, "Which part of the vector work moves the tail"). The part
    the sweep's own thread does when the idle thread is starved runs in the worker's
    class, charged at the pacer's share on top."""
    if pacer is None:
        return model.embed_documents(texts)
    if not settings.EMBED_IDLE_CLASS:
        with pacer.slice(listings):
            return model.embed_documents(texts)
    patience_s = settings.EMBED_IDLE_PATIENCE_MS / 1000
    with pacer.slice(listings, share=settings.EMBED_IDLE_SHARE):
        return on_idle_cores(lambda: model.embed_documents(texts), patience_s, pacer.charge)


def _slices(items: list[T]) -> Iterator[list[T]]:
    step = settings.EMBED_PACE_SLICE
    return (items[start : start + step] for start in range(0, len(items), step))


def settle_candidates() -> None:
    """Drop the embedding candidates that want nothing now (`EmbeddingCandidate`)."""
    with connection.cursor() as cursor:
        cursor.execute(SETTLE_ALL)


def _finish(flight: "_InFlight") -> int:
    """Wait until the claim's vectors are committed (raising what storing raised); how
    many were stored."""
    stored = flight.stored.result()
    _record(stored)
    return len(stored)


@dataclass
class _InFlight:
    """One claim's way through a lane: claimed, then given its vectors, then stored."""

    claimed: Future[list["_Claim"]] = field(default_factory=Future)
    embedded: Future[np.ndarray | None] = field(default_factory=Future)
    stored: Future[list["_Claim"]] = field(default_factory=Future)

    def abandon(self) -> None:
        """Roll the claim back unstored (a no-op once its vectors were handed over)."""
        if not self.embedded.done():
            self.embedded.set_result(None)


class _Lane:
    """A thread with its own database connection, running one claim's transaction at a
    time: claim, wait for the vectors, store, commit."""

    def __init__(self) -> None:
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed-lane")

    def submit(self, size: int, pacer: Pacer) -> _InFlight:
        flight = _InFlight()
        self._thread.submit(self._run, size, flight, pacer)
        return flight

    @staticmethod
    def _run(size: int, flight: _InFlight, pacer: Pacer) -> None:
        try:
            # A kept lane's connection may have aged past CONN_MAX_AGE, or broken in its
            # last sweep (Postgres restarted): replaced then, as a request's would be.
            close_old_connections()
            with transaction.atomic():
                claims = _claim_batch(size)
                flight.claimed.set_result(claims)
                vectors = flight.embedded.result() if claims else None
                if vectors is None:
                    transaction.set_rollback(True)
                stored = [] if vectors is None else _store(claims, vectors, pacer)
            flight.stored.set_result(stored)
        except BaseException as exc:
            for future in (flight.claimed, flight.stored):
                if not future.done():
                    future.set_exception(exc)

    def close(self) -> None:
        self._thread.submit(connections.close_all).result()
        self._thread.shutdown()


@contextmanager
def _lanes(keep: bool) -> Iterator[tuple[_Lane, _Lane]]:
    """Two lanes: with `keep`, this process's, kept from sweep to sweep with their
    connections; else two of the sweep's own, their connections closed at its end."""
    if keep:
        try:
            yield _kept.get()
        except BaseException:
            # A sweep that failed keeps none: a lane stuck on a frozen Postgres holds the
            # close, and so the task, until its hard time limit ends the process.
            close_kept_lanes()
            raise
        return
    lanes = (_Lane(), _Lane())
    try:
        yield lanes
    finally:
        for lane in lanes:
            lane.close()


# A worker's lanes, kept with their connections until its process exits: a trickle of
# listings queues a sweep for nearly every poll, and each sweep's lanes opened two
# connections, about 8 ms of Postgres CPU each with their first claim (against 0.2 ms on an
# open one): at 5 listings a second, 13 connections a second and about a tenth of a core.
_kept = PerProcess(lambda: (_Lane(), _Lane()))


def close_kept_lanes() -> None:
    """The kept lanes' connections closed and their threads ended (after a sweep that
    failed, or a test that ran the task in its own process). A worker process that stops
    leaves them to its exit."""
    for lane in _kept.forget() or ():
        lane.close()


def _claim_batch(size: int) -> list["_Claim"]:
    """Must run inside the transaction that stores the claim's vectors. The claim's
    snapshot predates its locks: a row another transaction held, and committed a vector
    for, just as the claim reached it, looks pending to it (the other lane of this sweep,
    or another worker). So the claimed rows are read again with the locks held (a new
    snapshot: READ COMMITTED) and those done already dropped; should that leave none, the
    claim is made again, and its new snapshot passes over them."""
    with connection.cursor() as cursor:
        while True:
            cursor.execute(CLAIM_SQL, claim_params(size))
            rows = cursor.fetchall()
            if len(rows) < size:
                cursor.execute(BACKFILL_CLAIM_SQL, claim_params(size, size - len(rows)))
                rows += cursor.fetchall()
            claims = [_claim(row) for row in rows]
            if not claims:
                return claims
            cursor.execute(
                STILL_PENDING,
                [
                    [c.listing_id for c in claims],
                    [c.generation_id for c in claims],
                    [c.content_version for c in claims],
                ],
            )
            pending = set(cursor.fetchall())
            kept = [c for c in claims if (c.listing_id, c.generation_id) in pending]
            if kept:
                return _with_reusable(cursor, kept)


def _with_reusable(cursor: Any, claims: list[_Claim]) -> list[_Claim]:
    """The claims, each with the vector its generation already has for its text, if any."""
    cursor.execute(REUSABLE, [[c.generation_id for c in claims], [c.digest for c in claims]])
    made = {
        (generation_id, bytes(digest)): Vector.from_text(text).to_numpy()
        for generation_id, digest, text in cursor.fetchall()
    }
    return [dataclasses.replace(c, reused=made.get((c.generation_id, c.digest))) for c in claims]


def _record(claims: list["_Claim"]) -> None:
    for claim in claims:
        metrics.EMBEDDED.labels(generation_state=claim.generation_state).inc()
        if claim.reused is not None:
            metrics.REUSED.labels(generation_state=claim.generation_state).inc()
        if claim.generation_state == "active" and claim.age_s is not None and claim.kind:
            metrics.VECTOR_LAG.labels(kind=claim.kind).observe(claim.age_s)


def _claim(row: tuple[Any, ...]) -> _Claim:  # a DB row of mixed types
    listing_id, gen_id, state, version, title, venue, aliases, description, kind, age = row
    return _Claim(
        listing_id=listing_id,
        generation_id=gen_id,
        generation_state=state,
        content_version=version,
        text=embedding_text(title, venue, aliases or [], description),
        kind=kind,
        age_s=float(age) if age is not None else None,
    )


def _store(claims: list[_Claim], vectors: np.ndarray, pacer: Pacer | None = None) -> list[_Claim]:
    """Upsert the vectors of the claims whose listings may have them (`STORABLE`); returns
    those claims. The writes (each an HNSW insert) never rest: from `STORABLE` to the
    commit the listings are locked FOR SHARE, and a poll changing one would wait out the
    rest. Their time is charged to `pacer` instead, so the model's next slice rests for it."""
    started = time.monotonic()
    now = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(STORABLE, [sorted({c.listing_id for c in claims})])
        storable = {row[0] for row in cursor.fetchall()}
        kept = [(c, v) for c, v in zip(claims, vectors, strict=True) if c.listing_id in storable]
        rows = [
            (c.listing_id, c.generation_id, Vector(v).to_text(), c.content_version, now, c.digest)
            for c, v in kept
        ]
        cursor.executemany(UPSERT, rows)
        cursor.execute(SETTLE_STORED, [sorted({c.listing_id for c, _ in kept})])
    if pacer is not None:
        pacer.charge(time.monotonic() - started)
    return [c for c, _ in kept]


def pending_count(generation_id: int) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) {pending_from('g.id = %s')}", [generation_id])
        return int(cursor.fetchone()[0])
