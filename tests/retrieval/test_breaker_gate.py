"""The breaker as the event loop calls it: outcomes are recorded off the caller's thread, and
those that gather while the breaker is busy reach it together, none lost. The breaker
behind it is injected and blocks on an event."""

import threading

from prometheus_client import REGISTRY

from resilience.breaker import State
from retrieval.bounds.breaker_gate import BreakerGate


class BlockingBreaker:
    def __init__(self, state: State = "closed") -> None:
        self.release = threading.Event()
        self.busy = threading.Event()
        self.recorded: list[tuple[int, int]] = []
        self.state = state
        self.reconnects: list[bool] = []

    def allow(self, *, reconnect: bool = True) -> bool:
        self.reconnects.append(reconnect)
        return self.state == "closed"

    def record_outcomes(self, calls: int, failures: int) -> None:
        self.busy.set()
        assert self.release.wait(10), "the test never released the breaker"
        self.recorded.append((calls, failures))

    def last_seen_state(self) -> State:
        return self.state


def test_record_returns_while_the_breaker_is_still_recording() -> None:
    breaker = BlockingBreaker()
    gate = BreakerGate(breaker, linger_s=0)
    gate.record(failed=True)  # would hang here if recorded on the caller's thread
    assert breaker.busy.wait(10)
    assert breaker.recorded == []
    breaker.release.set()
    gate.close()
    assert breaker.recorded == [(1, 1)]


def test_outcomes_gathered_while_it_is_busy_reach_it_in_one_call() -> None:
    breaker = BlockingBreaker()
    gate = BreakerGate(breaker, linger_s=0)
    gate.record(failed=False)
    assert breaker.busy.wait(10)  # the first outcome is being recorded ...
    for failed in (True, False, True, False, False):
        gate.record(failed=failed)  # ... while these gather
    breaker.release.set()
    gate.flush()
    assert breaker.recorded == [(1, 0), (5, 2)]
    gate.close()


def test_it_lingers_so_that_outcomes_close_together_share_one_call() -> None:
    breaker = BlockingBreaker()
    breaker.release.set()  # an idle breaker: only the lingering can gather these
    gate = BreakerGate(breaker, linger_s=3600)
    for failed in (True, False, False):
        gate.record(failed=failed)
    gate.flush()  # hands over at once, lingering or not
    assert breaker.recorded == [(3, 1)]
    gate.close()


def test_allow_reports_the_state_it_saw() -> None:
    gate = BreakerGate(BlockingBreaker("open"))
    assert not gate.allow()
    assert REGISTRY.get_sample_value("retrieval_vector_breaker_open") == 1
    gate = BreakerGate(BlockingBreaker("closed"))
    assert gate.allow()
    assert REGISTRY.get_sample_value("retrieval_vector_breaker_open") == 0


def test_allow_leaves_reconnecting_to_redis_to_the_thread() -> None:
    breaker = BlockingBreaker()
    gate = BreakerGate(breaker)
    gate.allow()
    assert breaker.reconnects == [False]
    gate.close()
