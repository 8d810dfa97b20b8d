"""The embedding sweep yields to searches (ingestion/pacing.py): full speed while searches
are quiet, a share of the time while they arrive, backing off within a second of the
signal and resuming within one poll of its end, and the floor's progress under pressure
that never ends. The pressure is injected and the clock is a test's: nothing sleeps."""

import base64
import itertools
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
import redis
from django.db import connection, transaction
from django.utils import timezone
from prometheus_client import REGISTRY
from pytest_django.fixtures import Settings

from ingestion import batches, generations, indexing, tasks
from ingestion.embedding import DIMENSIONS, MODEL_NAME
from ingestion.embedding_lag import EmbeddingLag
from ingestion.idle_cores import on_idle_cores
from ingestion.indexing import embed_pending
from ingestion.models import Listing, ListingEmbedding, Poll
from ingestion.pacing import POLL_S, RECOVER_S, Mode, PacePolicy, Pacer, catch_up_rate, gather
from ingestion.polling import ingest_payload
from ingestion.upsert import apply_draft
from resilience.redis_clients import get_redis
from resilience.search_pressure import QUIET, Pressure
from searchsite.celery import app as celery_app
from tests.factories import FakeClock, draft, source

SLICE_S = 0.05  # the model's time for one slice of texts, as the fake clock counts it
SLICE = 16
POLICY = PacePolicy(busy_share=0.5, slow_share=0.01, floor_per_s=20.0)
BUSY = Pressure(60.0, 0.0)
SLOW = Pressure(60.0, 0.5)  # half the searches slow: the share collapses


class Work:
    """Slices of vector work through a pacer on a fake clock: each slice takes SLICE_S,
    each rest advances the clock by what it rests."""

    def __init__(
        self,
        pressure: "Pressure | None" = None,
        policy: PacePolicy = POLICY,
        need: "Callable[[], float] | None" = None,
    ) -> None:
        self.clock = FakeClock(0.0)
        self.signal: Pressure = pressure or QUIET
        self.rested = 0.0
        self.starts: list[float] = []

        def sleep(seconds: float) -> None:
            self.rested += seconds
            self.clock.advance(seconds)

        self.pacer = Pacer(
            lambda: self.signal, policy, clock=self.clock, sleep=sleep, need=need or (lambda: 0.0)
        )

    def run_until(self, end: float) -> None:
        while self.clock() < end:
            with self.pacer.slice(SLICE):
                self.starts.append(self.clock())
                self.clock.advance(SLICE_S)

    def mode(self) -> Mode:
        return self.pacer.mode

    def items_between(self, start: float, end: float) -> int:
        return SLICE * sum(start <= at < end for at in self.starts)


def test_while_searches_are_quiet_the_sweep_never_rests() -> None:
    work = Work()
    work.run_until(10.0)
    assert work.rested == 0
    assert work.mode() is Mode.FULL
    assert len(work.starts) == pytest.approx(10.0 / SLICE_S, abs=1)


def test_searches_arriving_slow_the_sweep_within_a_second_and_their_end_restores_it() -> None:
    work = Work()
    work.run_until(5.0)
    work.signal = BUSY
    signalled = work.clock()
    work.run_until(15.0)
    # The first rest comes within a poll and a slice of the signal: under a second.
    first_rest_by = min(at for at in work.starts if at > signalled) - signalled
    assert first_rest_by <= POLL_S + 2 * SLICE_S < 1.0
    assert work.mode() == Mode.SHARED
    # It starts cautious and earns the policy's share over RECOVER_S while no search is slow.
    full_rate = SLICE / SLICE_S
    assert work.items_between(5.5, 6.5) < full_rate * POLICY.busy_share / 2
    busy_rate = work.items_between(5.0 + RECOVER_S + 1, 15.0) / (15.0 - 5.0 - RECOVER_S - 1)
    assert busy_rate == pytest.approx(full_rate * POLICY.busy_share, rel=0.1)

    work.signal = QUIET
    quiet_at = work.clock()
    work.run_until(20.0)
    resumed_by = min(at for at in work.starts if at >= quiet_at) - quiet_at
    assert resumed_by <= POLL_S + SLICE_S
    assert work.mode() == Mode.FULL
    assert work.items_between(16.0, 20.0) / 4.0 == pytest.approx(full_rate, rel=0.05)


def test_slow_searches_shrink_the_share_and_the_floor_holds_under_pressure_without_end() -> None:
    work = Work(SLOW)
    work.run_until(120.0)
    assert work.pacer.share < POLICY.busy_share / 8
    assert work.mode() is Mode.FLOOR
    # Every stretch of ten seconds gets the floor's listings, and not many more.
    for start in range(10, 120, 10):
        done = work.items_between(start, start + 10)
        assert POLICY.floor_per_s * 10 * 0.9 <= done <= POLICY.floor_per_s * 10 * 1.6 + SLICE


def test_without_a_share_searches_arriving_get_the_floor_in_slices_at_a_steady_interval() -> None:
    """The vectors' default: no share. Searches arriving, slices go only as the floor's
    credit allows, one every SLICE / floor_per_s seconds, within a poll of the signal;
    searches quiet, at full speed again within a poll."""
    policy = PacePolicy(busy_share=0.0, slow_share=0.01, floor_per_s=20.0)
    work = Work(policy=policy)
    work.run_until(5.0)
    work.signal = BUSY
    signalled = work.clock()
    work.run_until(65.0)
    assert work.mode() is Mode.FLOOR
    # Backed off within a poll of the signal (a slice in hand ends first): after that,
    # nothing until the floor's credit makes a slice.
    interval = SLICE / policy.floor_per_s
    later = [at for at in work.starts if at > signalled + POLL_S + SLICE_S]
    assert later[0] - signalled >= interval - SLICE_S
    # Steady: every slice starts a slice's worth of credit after the last; no run of
    # slices back to back, no long rest.
    gaps = [b - a for a, b in itertools.pairwise(later)]
    assert all(gap == pytest.approx(interval, abs=0.002) for gap in gaps), gaps
    assert work.items_between(5.0, 65.0) / 60.0 == pytest.approx(policy.floor_per_s, rel=0.1)

    work.signal = QUIET
    quiet_at = work.clock()
    work.run_until(70.0)
    resumed_by = min(at for at in work.starts if at >= quiet_at) - quiet_at
    assert resumed_by <= POLL_S + SLICE_S
    assert work.mode() is Mode.FULL


def test_the_floor_rises_to_what_the_backlog_needs_and_falls_back_with_it() -> None:
    """Searches arriving, no share: slices go at the backlog's need while it is above the
    configured floor, read again each poll, and at the floor once it is not."""
    policy = PacePolicy(busy_share=0.0, slow_share=0.01, floor_per_s=10.0)
    needs = [40.0]
    work = Work(BUSY, policy, need=lambda: needs[-1])
    work.run_until(30.0)
    assert work.items_between(5.0, 30.0) / 25.0 == pytest.approx(40.0, rel=0.05)
    assert work.pacer.floor_per_s == 40.0
    needs.append(0.0)
    work.run_until(60.0)
    assert work.items_between(35.0, 60.0) / 25.0 == pytest.approx(policy.floor_per_s, rel=0.1)


@pytest.mark.parametrize(
    ("pending", "oldest_s", "within_s", "rate"),
    [
        (5000, 0.0, 240.0, 5000 / 240),  # a burst just fetched: done as the objective ends
        (2500, 120.0, 240.0, 2500 / 120),  # halfway, on time: the same pace
        (8000, 0.0, 240.0, 25.0),  # more than the most a second: the lag grows instead
        (1000, 200.0, 240.0, 25.0),  # behind: the most, not all at once
        (1000, 300.0, 240.0, 25.0),  # late
        (0, None, 240.0, 0.0),  # nothing waiting
        (5000, 0.0, 0.0, 0.0),  # switched off: the configured floor alone
    ],
)
def test_the_backlog_needs_what_clears_it_within_the_objective_up_to_a_most(
    pending: int, oldest_s: float | None, within_s: float, rate: float
) -> None:
    lag = EmbeddingLag(pending, oldest_s)
    assert catch_up_rate(lag, within_s, most_per_s=25.0) == pytest.approx(rate)
    assert catch_up_rate(None, within_s, most_per_s=25.0) == 0.0  # the lag unknown


def test_the_floor_counts_listings_those_whose_vectors_were_reused_included() -> None:
    """Searches arriving, no share, a floor of 20 listings a second: a claim of 64
    listings of 16 texts, 16 more of a text made before, goes through the floor as 80
    listings (4 s of its credit), not as 16 texts."""
    policy = PacePolicy(busy_share=0.0, slow_share=0.01, floor_per_s=20.0)
    work = Work(BUSY, policy)
    made_before = np.ones(DIMENSIONS, dtype=np.float32)
    claims = [
        indexing._Claim(n, 1, "active", 1, f"Organ recital {n % 16:03}", "feed", None)
        for n in range(64)
    ] + [
        indexing._Claim(64 + n, 1, "active", 1, "Harp", "feed", None, made_before)
        for n in range(16)
    ]
    started = work.clock()
    vectors = indexing._vectors(ClassRecorder(work.clock), claims, work.pacer)  # type: ignore[arg-type]
    assert len(vectors) == 80
    assert (vectors[64:] == made_before).all()
    assert work.clock() - started >= 80 / policy.floor_per_s - POLL_S


def test_a_pressure_that_cannot_be_read_counts_as_searches_arriving() -> None:
    clock = FakeClock(0.0)
    rested: list[float] = []

    def unreadable() -> Pressure:
        raise redis.ConnectionError("gone")

    def sleep(seconds: float) -> None:
        rested.append(seconds)
        clock.advance(seconds)

    pacer = Pacer(unreadable, POLICY, clock=clock, sleep=sleep)
    for _ in range(3):
        with pacer.slice(SLICE):
            clock.advance(SLICE_S)
    assert pacer.mode is not Mode.FULL
    assert sum(rested) > 0


@pytest.mark.django_db(transaction=True)  # the sweep's lanes connect on their own
def test_a_sweep_under_pressure_that_never_ends_still_embeds_everything_at_the_floor(
    settings: Settings,
) -> None:
    """The real sweep and model, its pacer told that searches arrive, all slow: every
    listing still gets its vector, the sweep resting between slices, never past what the
    floor allows. (The model in the sweep's own class, as when the idle thread is starved:
    on idle cores it is not charged, and rests only for the writes.)"""
    settings.EMBED_IDLE_CLASS = False
    generation = generations.ensure_active_generation(MODEL_NAME, DIMENSIONS).pk
    with transaction.atomic():
        feed = source()
        for number in range(40):
            title = f"Organ recital {number}"
            apply_draft(feed, draft(f"id-{number}", title=title), timezone.now())
    slept: list[float] = []
    # Real time for the work, plus the rests the sweep asked for, which pass at once.
    real = FakeClock(0.0)

    def clock() -> float:
        return time.monotonic() + real()

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        real.advance(seconds)

    policy = PacePolicy(busy_share=0.5, slow_share=0.01, floor_per_s=8.0)
    pacer = Pacer(lambda: SLOW, policy, clock=clock, sleep=sleep)
    assert embed_pending(float("inf"), pacer=pacer, clock=clock) == 40
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM ingestion_listing_embedding WHERE generation_id = %s",
            [generation],
        )
        assert cursor.fetchone()[0] == 40
    # It yielded, and no longer than the floor allows: 40 listings embedded, then 40
    # written, at 8 a second each, is ten seconds of rests at most (and a poll's margin).
    assert 1.0 <= sum(slept) <= 2 * 40 / policy.floor_per_s + 1


def _feed(items: int) -> bytes:
    entries = "".join(
        f"<item><title>Organ recital {n}</title><guid>recital-{n}</guid></item>"
        for n in range(items)
    )
    return (
        f'<?xml version="1.0"?><rss version="2.0"><channel><title>Hall</title>{entries}'.encode()
        + (b"</channel></rss>")
    )


@pytest.mark.django_db
@pytest.mark.parametrize(("pressure", "rests"), [(QUIET, False), (BUSY, True)])
def test_a_large_payload_is_applied_in_chunks_resting_only_while_searches_arrive(
    pressure: Pressure, rests: bool, monkeypatch: pytest.MonkeyPatch, settings: Settings
) -> None:
    settings.INGEST_PACE_CHUNK = 100
    offset = FakeClock(0.0)
    slept: list[float] = []
    chunks: list[int] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        offset.advance(seconds)

    def pacer() -> Pacer:
        made = Pacer(
            lambda: pressure,
            PacePolicy(busy_share=0.5, slow_share=0.01, floor_per_s=100.0, start=1.0),
            clock=lambda: time.monotonic() + offset(),
            sleep=sleep,
            work="listings",
        )
        admit = made.slice

        def counted(items: int, share: float | None = None) -> Any:
            chunks.append(items)
            return admit(items, share=share)

        made.slice = counted  # type: ignore[method-assign]
        return made

    monkeypatch.setattr(batches, "payload_pacer", pacer)
    poll = ingest_payload(source(), _feed(250), started_at=timezone.now())
    assert (poll.status, poll.new) == (Poll.Status.OK, 250)
    assert chunks == [100, 100, 50]
    assert Listing.objects.filter(title__startswith="Organ recital").count() == 250
    assert (sum(slept) > 0) is rests


def test_work_that_ran_without_asking_is_charged_to_the_next_slice() -> None:
    """The sweep's vector writes never rest (their listings are locked meanwhile): their
    time is charged, and the model's next slice rests for it at the share, or until the
    floor lets it through (without the charge it would rest one slice's time)."""
    work = Work(BUSY)
    work.run_until(10.0)  # past the ramp: the policy's share, 0.5
    rested = work.rested
    work.pacer.charge(2.0)
    work.run_until(work.clock() + SLICE_S)
    assert work.rested - rested >= SLICE / POLICY.floor_per_s - POLL_S > SLICE_S


class ClassRecorder:
    """An embedder that notes the scheduling class of the thread each call runs on, each
    call taking SLICE_S of `clock`."""

    def __init__(self, clock: FakeClock) -> None:
        self.classes: list[int] = []
        self.clock = clock

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        self.classes.append(os.sched_getscheduler(0))
        self.clock.advance(SLICE_S)
        return np.zeros((len(texts), DIMENSIONS), dtype=np.float32)


def _claims(count: int) -> list[Any]:
    return [
        indexing._Claim(n, 1, "active", 1, f"Organ recital {n:03}", "feed", None)
        for n in range(count)
    ]


@pytest.mark.parametrize("idle_class", [True, False])
def test_the_model_runs_on_idle_cores_whatever_let_it_through(
    settings: Settings, idle_class: bool
) -> None:
    """Searches quiet, then arriving all slow: every slice, paced or not, runs on a
    SCHED_IDLE thread (the sweep's own thread is in its normal class)."""
    settings.EMBED_IDLE_CLASS = idle_class
    work = Work()
    modes: list[Mode] = []
    slice_of = work.pacer.slice

    @contextmanager
    def noted(items: int, share: float | None = None) -> Iterator[None]:
        with slice_of(items, share=share):
            modes.append(work.pacer.mode)  # the mode that let this slice through
            yield

    work.pacer.slice = noted  # type: ignore[method-assign]  # the pacer's own, noted
    recorder = ClassRecorder(work.clock)
    indexing._vectors(recorder, _claims(4 * SLICE), work.pacer)  # type: ignore[arg-type]
    work.signal = SLOW
    for _ in range(10):
        indexing._vectors(recorder, _claims(4 * SLICE), work.pacer)  # type: ignore[arg-type]
    assert Mode.FULL in modes
    assert {Mode.SHARED, Mode.FLOOR} & set(modes)
    assert recorder.classes == [os.SCHED_IDLE if idle_class else os.SCHED_OTHER] * len(modes)


@pytest.mark.parametrize(
    ("idle_class", "idle_share", "rests_per_slice"),
    [(False, 0.25, 1.0), (True, 0.25, 3.0), (True, 0.5, 1.0), (True, 1.0, 0.0)],
)
def test_the_models_time_on_idle_cores_is_charged_at_its_own_share(
    settings: Settings, idle_class: bool, idle_share: float, rests_per_slice: float
) -> None:
    """Searches arriving, none slow, the share grown to the policy's (0.5): in the normal
    class each slice's time makes the next one rest for as long; on idle cores the model
    takes only CPU searches leave, but that still costs them, so it rests at
    EMBED_IDLE_SHARE: three slices' time at a quarter, none at the whole."""
    settings.EMBED_IDLE_CLASS = idle_class
    settings.EMBED_IDLE_SHARE = idle_share
    work = Work(BUSY)
    work.run_until(RECOVER_S + 1)  # past the ramp
    rested = work.rested
    recorder = ClassRecorder(work.clock)
    slices = 8
    indexing._vectors(recorder, _claims(slices * SLICE), work.pacer)  # type: ignore[arg-type]
    assert work.pacer.mode is not Mode.FULL
    # A rest before each slice but the first (give or take the one the ramp left).
    expected = rests_per_slice * (slices - 1) * SLICE_S
    assert work.rested - rested == pytest.approx(expected, abs=2 * SLICE_S)


def test_work_the_idle_thread_gets_no_cpu_for_is_done_by_the_caller() -> None:
    """Searches keep every core busy: the SCHED_IDLE thread makes no progress (here it
    waits, which takes no CPU either), and after a patience the caller does the work in
    its own class, so the floor holds; the caller's time is charged."""
    stalled, ran_on = threading.Event(), []
    charged: list[float] = []

    def work() -> str:
        ran_on.append(os.sched_getscheduler(0))
        if ran_on[0] == os.SCHED_IDLE and len(ran_on) == 1:
            assert stalled.wait(timeout=30)
        return "vectors"

    starved = REGISTRY.get_sample_value("ingestion_idle_cores_starved_total") or 0.0
    try:
        assert on_idle_cores(work, patience_s=0.05, charge=charged.append) == "vectors"
    finally:
        stalled.set()
    assert ran_on == [os.SCHED_IDLE, os.SCHED_OTHER]
    assert len(charged) == 1
    assert REGISTRY.get_sample_value("ingestion_idle_cores_starved_total") == starved + 1


UNREADABLE = None  # a read that raises, as with Redis down


@pytest.mark.parametrize(
    ("signals", "waited"),
    [([QUIET], 0.0), ([BUSY], 2.0), ([BUSY] * 5 + [QUIET], 5 * POLL_S), ([UNREADABLE], 2.0)],
    ids=["searches-quiet", "searches-arriving", "searches-going-quiet", "pressure-unreadable"],
)
def test_a_new_sweep_gathers_only_while_searches_arrive(
    settings: Settings, signals: list[Pressure | None], waited: float
) -> None:
    """Quiet: it starts at once. Arriving, or not known: it waits EMBED_GATHER_S. Going
    quiet meanwhile: it starts within one poll of that."""
    settings.EMBED_GATHER_S = 2.0
    clock = FakeClock(0.0)
    reads = iter(signals)
    last: list[Pressure | None] = [None]

    def pressure() -> Pressure:
        last[0] = next(reads, last[0])
        if last[0] is None:
            raise redis.ConnectionError("gone")
        return last[0]

    rests = "ingestion_paced_rest_seconds_total"
    before = REGISTRY.get_sample_value(rests, {"work": "vectors"}) or 0.0
    gather(pressure, clock, clock.advance)
    assert clock() == pytest.approx(waited)
    # The wait is shown among the vectors' rests.
    assert REGISTRY.get_sample_value(rests, {"work": "vectors"}) == pytest.approx(before + waited)


def _queued_sweeps() -> list[dict[str, Any]]:
    """The keyword arguments of each embedding sweep in the broker's queue."""
    messages = get_redis().lrange("embedding", 0, -1)
    return [json.loads(base64.b64decode(json.loads(m)["body"]))[1] for m in messages]


@pytest.mark.django_db(transaction=True)  # the sweep's lanes connect on their own
@pytest.mark.usefixtures("no_queued_embedding")
def test_a_new_sweep_claims_what_arrived_while_it_gathered_and_a_continuing_one_never_waits(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The task's own function and the real model: a listing that arrives while a new
    sweep gathers is embedded by that sweep. A sweep whose time slice ran out queues its
    continuation, which does not gather: what it will find is already waiting; nor does
    beat's safety sweep."""
    generation = generations.ensure_active_generation(MODEL_NAME, DIMENSIONS).pk
    feed = source()

    def arrives_meanwhile() -> None:
        with transaction.atomic():
            apply_draft(feed, draft("while-gathering", title="Harp recital"), timezone.now())

    monkeypatch.setattr("ingestion.pacing.gather", arrives_meanwhile)
    assert tasks.embed_pending() == 1
    assert ListingEmbedding.objects.filter(
        generation_id=generation, listing__records__external_id="while-gathering"
    ).exists()

    def never() -> None:
        raise AssertionError("a continuing sweep gathered")

    monkeypatch.setattr("ingestion.pacing.gather", never)
    settings.EMBED_TASK_SLICE_S = 0.0  # the slice is used up at once: it continues
    tasks.embed_pending(gather=False)
    assert _queued_sweeps() == [{"gather": False}]
    tasks.schedule_embedding()  # already queued: nothing more
    get_redis().delete("embedding", tasks.EMBED_SCHEDULED_KEY)
    tasks.schedule_embedding()  # a poll's: a new sweep, which gathers
    assert _queued_sweeps() == [{"gather": True}]
    beat = celery_app.conf.beat_schedule["embed-pending"]
    tasks.embed_pending(**beat["kwargs"])  # beat's safety sweep: nothing to gather for
