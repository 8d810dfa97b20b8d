"""The vector stage's breaker, shared through the real Valkey. Each `SharedBreaker` built on
the same key stands for one web process; an injected clock drives time, nothing sleeps."""

import functools
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
import redis
from django.conf import settings

from resilience.breaker import BreakerPolicy, BreakerState, record
from resilience.breaker import trips as window_trips
from resilience.redis_clients import breaker_redis_client, get_redis
from resilience.shared_breaker import SharedBreaker
from tests.conftest import run_together
from tests.factories import FakeClock

POLICY = BreakerPolicy(window_s=60, min_calls=3, failure_ratio=0.5, cooldown_s=30)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_700_000_000.0)  # wall time: bucket indices of today's size


@pytest.fixture
def key() -> Iterator[str]:
    key = f"test:vector-breaker:{uuid.uuid4().hex}"
    yield key
    client = get_redis()
    if written := list(client.scan_iter(match=f"{key}*")):
        client.delete(*written)


@pytest.fixture
def process(key: str, clock: FakeClock) -> Callable[..., SharedBreaker]:
    """A factory of breakers on the test's key: one per simulated web process."""

    def make(
        policy: BreakerPolicy = POLICY,
        client: redis.Redis | None = None,
        redis_retry_s: float = 1.0,
    ) -> SharedBreaker:
        return SharedBreaker(client or get_redis(), key, policy, clock, redis_retry_s=redis_retry_s)

    return make


def _fail(breaker: SharedBreaker, times: int) -> None:
    for _ in range(times):
        breaker.record(failed=True)


@contextmanager
def redis_outage(client: redis.Redis) -> Iterator[None]:
    """Point the client's future connections at a socket nobody listens on, then back."""
    pool = client.connection_pool
    path = pool.connection_kwargs["path"]
    # A connection keeps the path it was made with, so each switch drops them all.
    unreachable = f"/nonexistent/{uuid.uuid4().hex}.sock"
    pool.update_connection_kwargs(path=unreachable)  # type: ignore[no-untyped-call]  # unannotated in redis-py
    pool.disconnect()
    pool.reset()
    try:
        yield
    finally:
        pool.update_connection_kwargs(path=path)  # type: ignore[no-untyped-call]  # unannotated in redis-py
        pool.reset()


def test_it_opens_after_the_policys_failures(process: Callable[..., SharedBreaker]) -> None:
    breaker = process()
    _fail(breaker, 2)
    assert breaker.state() == "closed"
    assert breaker.allow()
    _fail(breaker, 1)
    assert breaker.state() == "open"
    assert not breaker.allow()


def test_successes_dilute_the_failure_ratio(process: Callable[..., SharedBreaker]) -> None:
    breaker = process()
    for _ in range(10):
        breaker.record(failed=False)
    _fail(breaker, 3)
    assert breaker.window() == (13, 3)
    assert breaker.state() == "closed"


def test_outcomes_older_than_the_window_do_not_count(
    process: Callable[..., SharedBreaker], clock: FakeClock
) -> None:
    breaker = process()
    _fail(breaker, 2)
    clock.advance(POLICY.window_s + 1)
    _fail(breaker, 1)
    assert breaker.window() == (1, 1)
    assert breaker.state() == "closed"


def test_closed_traffic_never_writes_the_state_document(
    process: Callable[..., SharedBreaker], key: str
) -> None:
    breaker = process()
    for _ in range(20):
        assert breaker.allow()
        breaker.record(failed=False)
    assert not get_redis().exists(key)


class CountingConnection(redis.UnixDomainSocketConnection):
    """Counts round trips: a pipeline is sent in one piece, like a single command."""

    sent = 0

    def send_packed_command(self, command: object, check_health: bool = True) -> None:
        CountingConnection.sent += 1
        super().send_packed_command(command, check_health)  # type: ignore[no-untyped-call]  # unannotated in redis-py


def counting_round_trips(process: Callable[..., SharedBreaker]) -> SharedBreaker:
    pool = redis.ConnectionPool.from_url(settings.REDIS_URL, connection_class=CountingConnection)
    breaker = process(client=redis.Redis(connection_pool=pool))
    breaker.window()  # connects (and says hello) first
    return breaker


def stale(clock: FakeClock) -> None:
    """Past the freshness of what a breaker last read."""
    clock.advance(1)


def round_trips(call: Callable[[], object]) -> int:
    before = CountingConnection.sent
    call()
    return CountingConnection.sent - before


def test_the_closed_hot_path_costs_one_round_trip_per_call(
    process: Callable[..., SharedBreaker], clock: FakeClock
) -> None:
    breaker = counting_round_trips(process)
    stale(clock)
    assert round_trips(breaker.allow) == 1
    assert round_trips(lambda: breaker.record(failed=False)) == 1
    assert round_trips(lambda: breaker.record(failed=True)) == 1
    # The outcome that opens it adds the transition: WATCH, GET, then MULTI/SET/EXEC at once.
    assert round_trips(lambda: breaker.record(failed=True)) == 1 + 3
    assert breaker.state() == "open"


def test_allow_answers_from_a_fresh_closed_read_without_a_round_trip(
    process: Callable[..., SharedBreaker], clock: FakeClock
) -> None:
    breaker, other = counting_round_trips(process), process()
    stale(clock)
    assert round_trips(breaker.allow) == 1
    clock.advance(0.05)
    assert round_trips(breaker.allow) == 0  # read 50 ms ago: still fresh
    _fail(other, 3)  # another process opens it: seen here once the read is stale
    assert breaker.allow()
    clock.advance(0.06)
    assert round_trips(breaker.allow) == 1
    assert not breaker.allow()


def test_allow_refuses_during_the_cooldown_without_a_round_trip(
    process: Callable[..., SharedBreaker], clock: FakeClock
) -> None:
    breaker = counting_round_trips(process)
    _fail(breaker, 3)
    assert breaker.state() == "open"
    clock.advance(POLICY.cooldown_s - 1)
    assert round_trips(breaker.allow) == 0  # nothing can change before the cool-down ends
    assert not breaker.allow()
    clock.advance(1)
    assert breaker.allow()  # the probe: decided in Redis, against the other processes


def test_one_process_opening_it_is_seen_open_by_another(
    process: Callable[..., SharedBreaker],
) -> None:
    first, second = process(), process()
    assert second.allow()
    _fail(first, 3)
    assert second.state() == "open"
    assert not second.allow()


def test_failures_of_several_processes_add_up(process: Callable[..., SharedBreaker]) -> None:
    first, second, third = process(), process(), process()
    for breaker in (first, second, third):
        breaker.record(failed=True)
    assert first.state() == "open"


def test_after_the_cooldown_only_one_process_gets_the_probe(
    process: Callable[..., SharedBreaker], clock: FakeClock
) -> None:
    processes = [process() for _ in range(4)]
    _fail(processes[0], 3)
    clock.advance(POLICY.cooldown_s - 1)
    assert not any(breaker.allow() for breaker in processes)
    clock.advance(1)
    assert [breaker.allow() for breaker in processes] == [True, False, False, False]
    assert {breaker.state() for breaker in processes} == {"half_open"}


def test_racing_threads_get_exactly_one_probe(
    process: Callable[..., SharedBreaker], clock: FakeClock
) -> None:
    processes = [process() for _ in range(10)]
    winners: list[SharedBreaker] = []

    def race(breaker: SharedBreaker) -> None:
        if breaker.allow():
            winners.append(breaker)

    _fail(processes[0], 3)
    for _ in range(20):  # a lost race is rare in one round: run many
        clock.advance(POLICY.cooldown_s)
        winners.clear()
        _run_in_threads(race, processes)
        assert len(winners) == 1
        winners[0].record(failed=True)  # reopens it for the next round


def test_a_successful_probe_closes_it_for_all_with_a_fresh_window(
    process: Callable[..., SharedBreaker], clock: FakeClock
) -> None:
    prober, other = process(), process()
    _fail(prober, 3)
    clock.advance(POLICY.cooldown_s)
    assert prober.allow()
    prober.record(failed=False)
    assert other.state() == "closed"
    assert other.allow()
    assert other.window() == (0, 0)  # the failures that opened it are forgotten
    _fail(other, 2)
    assert prober.state() == "closed"


def test_a_failed_probe_reopens_it_for_another_cooldown(
    process: Callable[..., SharedBreaker], clock: FakeClock
) -> None:
    prober, other = process(), process()
    _fail(prober, 3)
    clock.advance(POLICY.cooldown_s)
    assert prober.allow()
    prober.record(failed=True)
    assert other.state() == "open"
    clock.advance(POLICY.cooldown_s - 1)
    assert not other.allow()
    clock.advance(1)
    assert other.allow()


def test_a_probe_that_never_reports_is_handed_to_another_process(
    process: Callable[..., SharedBreaker], clock: FakeClock
) -> None:
    vanished, other = process(), process()
    _fail(vanished, 3)
    clock.advance(POLICY.cooldown_s)
    assert vanished.allow()  # ... and its process dies before recording
    clock.advance(POLICY.cooldown_s - 1)
    assert not other.allow()
    clock.advance(1)
    assert other.allow()


def test_concurrent_records_lose_no_updates(process: Callable[..., SharedBreaker]) -> None:
    never_trips = BreakerPolicy(window_s=60, min_calls=10_000, failure_ratio=0.5, cooldown_s=30)

    def work(breaker: SharedBreaker) -> None:
        for _ in range(5):
            breaker.record(failed=True)
            breaker.record(failed=False)

    _run_in_threads(work, [process(never_trips) for _ in range(10)])
    assert process(never_trips).window() == (100, 50)


def test_concurrent_failures_open_it_at_exactly_the_threshold(
    process: Callable[..., SharedBreaker],
) -> None:
    fifty_failures = BreakerPolicy(window_s=60, min_calls=50, failure_ratio=1.0, cooldown_s=30)
    processes = [process(fifty_failures) for _ in range(7)]
    _run_in_threads(lambda breaker: _fail(breaker, 7), processes)
    assert processes[0].window() == (49, 49)
    assert processes[0].state() == "closed"
    _fail(processes[1], 1)
    assert processes[0].state() == "open"


@pytest.mark.parametrize(
    "policy",
    [POLICY, BreakerPolicy(window_s=60, min_calls=5, failure_ratio=0.2, cooldown_s=30)],
    ids=["half-of-3", "a-fifth-of-5"],
)
def test_the_window_verdict_agrees_with_the_pure_machine(policy: BreakerPolicy) -> None:
    for earlier_calls in range(12):
        for earlier_failures in range(earlier_calls + 1):
            for failed in (False, True):
                outcomes = ((0.0, True),) * earlier_failures + ((0.0, False),) * (
                    earlier_calls - earlier_failures
                )
                pure = record(BreakerState(outcomes=outcomes), policy, 1.0, failed=failed)
                counted = window_trips(earlier_calls + 1, earlier_failures + failed, policy)
                assert counted == (pure.state == "open"), (earlier_calls, earlier_failures, failed)


def test_an_unreadable_document_reads_as_closed(
    process: Callable[..., SharedBreaker], key: str
) -> None:
    get_redis().set(key, b"{not json")
    breaker = process()
    assert breaker.state() == "closed"
    assert breaker.allow()


def test_with_redis_unreachable_it_runs_on_its_own_state_and_never_raises(
    process: Callable[..., SharedBreaker], clock: FakeClock
) -> None:
    unreachable = breaker_redis_client(f"unix:///nonexistent/{uuid.uuid4().hex}.sock")
    breaker = process(client=unreachable)
    assert breaker.allow()
    assert not breaker.shared
    _fail(breaker, 2)
    assert breaker.state() == "closed"
    _fail(breaker, 1)
    assert breaker.state() == "open"
    assert not breaker.allow()
    clock.advance(POLICY.cooldown_s)
    assert breaker.allow()
    assert not breaker.allow()  # one probe at a time, locally too
    breaker.record(failed=False)
    assert breaker.state() == "closed"


def test_during_an_outage_it_starts_from_the_last_state_it_read(
    process: Callable[..., SharedBreaker], clock: FakeClock
) -> None:
    client = breaker_redis_client(settings.REDIS_URL)
    breaker = process(client=client)
    _fail(process(), 3)
    assert not breaker.allow()
    with redis_outage(client):
        assert not breaker.allow()  # still open: it does not hammer a failing stage
        clock.advance(POLICY.cooldown_s)
        assert breaker.allow()  # Redis is needed for the probe, and fails: locally, then
        assert not breaker.shared
        breaker.record(failed=False)
        assert breaker.state() == "closed"
    assert process().state() == "open"  # a local verdict is never pushed to the others


def test_it_switches_back_to_the_shared_state_when_redis_answers_again(
    process: Callable[..., SharedBreaker], clock: FakeClock
) -> None:
    client = breaker_redis_client(settings.REDIS_URL)
    breaker = process(client=client, redis_retry_s=5)
    with redis_outage(client):
        _fail(breaker, 3)
        assert not breaker.allow()
    assert not breaker.allow()  # Redis is not asked again before `redis_retry_s`
    assert not breaker.shared
    clock.advance(5)
    assert breaker.allow()
    assert breaker.shared
    assert breaker.state() == "closed"


def test_without_reconnect_it_stays_on_its_own_until_outcomes_find_redis_back(
    process: Callable[..., SharedBreaker], clock: FakeClock
) -> None:
    client = breaker_redis_client(settings.REDIS_URL)
    breaker = process(client=client, redis_retry_s=5)
    with redis_outage(client):
        assert breaker.allow(reconnect=False)
        assert not breaker.shared
    clock.advance(5)
    assert breaker.allow(reconnect=False)
    assert not breaker.shared  # Redis answers, but allow() did not ask
    breaker.record(failed=False)
    assert breaker.shared


def _run_in_threads(work: Callable[[SharedBreaker], None], breakers: list[SharedBreaker]) -> None:
    run_together([functools.partial(work, breaker) for breaker in breakers])


def test_outcomes_recorded_together_count_each_and_settle_a_probe_on_any_failure(
    process: Callable[..., SharedBreaker], clock: FakeClock
) -> None:
    breaker = process()
    breaker.record_outcomes(2, 1)
    assert breaker.window() == (2, 1)
    assert breaker.state() == "closed"  # under the policy's min_calls
    breaker.record_outcomes(2, 1)  # 4 calls, 2 failed: the policy's failure ratio
    assert breaker.state() == "open"
    clock.advance(POLICY.cooldown_s)
    assert breaker.allow()  # the probe, reported with two stragglers
    breaker.record_outcomes(3, 1)
    assert breaker.state() == "open"
    clock.advance(POLICY.cooldown_s)
    assert breaker.allow()
    breaker.record_outcomes(2, 0)
    assert breaker.state() == "closed"
