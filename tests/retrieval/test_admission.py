"""The per-process bound on in-flight vector searches."""

import asyncio

import pytest

from retrieval.bounds.admission import AdmissionLimit, Slot
from tests.conftest import run_together


def _acquire(limit: AdmissionLimit) -> Slot:
    slot = limit.try_acquire()
    assert slot is not None
    return slot


def test_it_grants_up_to_the_limit_and_sheds_beyond() -> None:
    limit = AdmissionLimit(2)
    first, second = _acquire(limit), _acquire(limit)
    assert limit.try_acquire() is None
    assert limit.in_flight == 2
    assert first.held
    assert second.held


def test_releasing_a_slot_frees_it_for_the_next_search() -> None:
    limit = AdmissionLimit(1)
    slot = _acquire(limit)
    slot.release()
    assert not slot.held
    assert limit.in_flight == 0
    assert limit.try_acquire() is not None


def test_releasing_a_slot_twice_gives_back_one_place() -> None:
    limit = AdmissionLimit(2)
    slot = _acquire(limit)
    _acquire(limit)
    slot.release()
    slot.release()
    assert limit.in_flight == 1


def test_a_slot_used_as_a_context_manager_is_released_on_exit() -> None:
    limit = AdmissionLimit(1)
    with _acquire(limit):
        assert limit.in_flight == 1
    assert limit.in_flight == 0


def test_slot_says_whether_the_block_was_admitted_and_releases_only_what_it_took() -> None:
    limit = AdmissionLimit(1)
    with limit.slot() as admitted:
        assert admitted
        with limit.slot() as also_admitted:
            assert not also_admitted
        assert limit.in_flight == 1  # the shed block gave nothing back
    assert limit.in_flight == 0


def test_slot_is_released_when_the_block_raises() -> None:
    limit = AdmissionLimit(1)
    with pytest.raises(RuntimeError), limit.slot():
        raise RuntimeError("the vector search failed")
    assert limit.in_flight == 0


def test_a_limit_of_zero_sheds_everything_and_a_negative_one_is_refused() -> None:
    assert AdmissionLimit(0).try_acquire() is None
    with pytest.raises(ValueError, match="negative"):
        AdmissionLimit(-1)


async def test_it_bounds_concurrent_searches_in_an_event_loop() -> None:
    limit = AdmissionLimit(3)
    peak = 0
    shed = 0

    async def search() -> None:
        nonlocal peak, shed
        with limit.slot() as admitted:
            if not admitted:
                shed += 1
                return
            peak = max(peak, limit.in_flight)
            await asyncio.sleep(0)

    await asyncio.gather(*(search() for _ in range(10)))
    assert peak == 3
    assert shed == 7
    assert limit.in_flight == 0


async def test_a_cancelled_search_gives_its_slot_back() -> None:
    limit = AdmissionLimit(1)
    started = asyncio.Event()

    async def search() -> None:
        with limit.slot():
            started.set()
            await asyncio.Event().wait()  # a stalled vector search

    task = asyncio.create_task(search())
    await started.wait()
    assert limit.in_flight == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert limit.in_flight == 0


def test_threads_never_exceed_the_limit_or_lose_a_release() -> None:
    # A smoke test: under CPython's GIL a missing lock rarely shows (mutation-tested: it
    # did not), so the lock's correctness rests on review; this catches gross mistakes.
    limit = AdmissionLimit(3)
    observed: list[int] = []

    def hammer() -> None:
        for _ in range(2_000):
            slot = limit.try_acquire()
            if slot is not None:
                observed.append(limit.in_flight)
                slot.release()

    run_together([hammer] * 8)
    assert observed
    assert max(observed) <= 3
    assert limit.in_flight == 0


def test_threads_releasing_the_same_slot_give_back_one_place() -> None:
    limit = AdmissionLimit(2)
    _acquire(limit)
    slot = _acquire(limit)
    run_together([slot.release] * 8)
    assert limit.in_flight == 1
