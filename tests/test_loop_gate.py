"""The breaker as the event loop calls it: outcomes are recorded off the loop, in order,
and a backlog is bounded. The breaker behind it is injected and blocks on an event."""

import threading

from prometheus_client import REGISTRY

from retrieval.loop_gate import LoopGate
from searchsite.breaker import State


class BlockingBreaker:
    def __init__(self, state: State = "closed") -> None:
        self.release = threading.Event()
        self.recorded: list[bool] = []
        self.state = state

    def allow(self) -> bool:
        return self.state == "closed"

    def record(self, *, failed: bool) -> None:
        assert self.release.wait(10), "the test never released the breaker"
        self.recorded.append(failed)

    def last_seen_state(self) -> State:
        return self.state


def _sample(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


def test_record_returns_while_the_breaker_is_still_recording() -> None:
    breaker = BlockingBreaker()
    gate = LoopGate(breaker)
    for failed in (True, False, True):
        gate.record(failed=failed)  # would hang here if recorded on the caller's thread
    assert breaker.recorded == []
    breaker.release.set()
    gate.flush()
    assert breaker.recorded == [True, False, True]


def test_a_backlog_beyond_the_bound_is_dropped_and_counted() -> None:
    breaker = BlockingBreaker()
    gate = LoopGate(breaker, max_pending=2)
    dropped = _sample("retrieval_vector_breaker_outcomes_dropped_total")
    for _ in range(5):
        gate.record(failed=True)
    assert _sample("retrieval_vector_breaker_outcomes_dropped_total") == dropped + 3
    breaker.release.set()
    gate.flush()
    assert breaker.recorded == [True, True]
    gate.record(failed=False)  # the slots came back
    gate.flush()
    assert breaker.recorded == [True, True, False]


def test_allow_reports_the_state_it_saw() -> None:
    gate = LoopGate(BlockingBreaker("open"))
    assert not gate.allow()
    assert _sample("retrieval_vector_breaker_open") == 1
    gate = LoopGate(BlockingBreaker("closed"))
    assert gate.allow()
    assert _sample("retrieval_vector_breaker_open") == 0
