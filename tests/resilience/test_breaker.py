"""The breaker's state machine, driven by an explicit clock."""

import random

from resilience.breaker import BreakerPolicy, BreakerState, admit, record, record_many

POLICY = BreakerPolicy(window_s=60, min_calls=3, failure_ratio=0.5, cooldown_s=30)


def _after(outcomes: list[bool], start: float = 0.0) -> BreakerState:
    breaker = BreakerState()
    for step, failed in enumerate(outcomes):
        breaker = record(breaker, POLICY, start + step, failed=failed)
    return breaker


def test_it_stays_closed_below_the_minimum_number_of_calls() -> None:
    assert _after([True, True]).state == "closed"


def test_it_opens_when_the_failure_ratio_is_reached() -> None:
    assert _after([False, True, True]).state == "open"
    assert _after([False, False, True]).state == "closed"


def test_outcomes_older_than_the_window_do_not_count() -> None:
    breaker = _after([True, True])
    breaker = record(breaker, POLICY, 100.0, failed=True)
    assert breaker.state == "closed"
    assert len(breaker.outcomes) == 1


def test_open_refuses_until_the_cooldown_then_lets_one_probe_through() -> None:
    opened = _after([True, True, True])
    assert admit(opened, POLICY, 10.0)[0] is False
    allowed, probing = admit(opened, POLICY, 2.0 + 30.0)
    assert allowed
    assert probing.state == "half_open"
    assert admit(probing, POLICY, 33.0)[0] is False  # only one probe at a time


def test_a_successful_probe_closes_and_a_failed_one_reopens() -> None:
    _, probing = admit(_after([True, True, True]), POLICY, 40.0)
    assert record(probing, POLICY, 41.0, failed=False) == BreakerState()
    reopened = record(probing, POLICY, 41.0, failed=True)
    assert reopened.state == "open"
    assert reopened.opened_at == 41.0


def test_a_probe_that_never_reports_is_given_up_after_a_cooldown() -> None:
    _, probing = admit(_after([True, True, True]), POLICY, 40.0)
    allowed, again = admit(probing, POLICY, 71.0)
    assert allowed
    assert again.probe_started_at == 71.0


def test_it_round_trips_through_json() -> None:
    breaker = _after([True, False])
    assert BreakerState.from_json(breaker.to_json()) == breaker
    assert BreakerState.from_json(None) == BreakerState()


def test_outcomes_folded_in_at_once_give_the_breaker_folding_them_one_by_one_gives() -> None:
    rng = random.Random(5)
    for _ in range(300):
        breaker, now = BreakerState(), 0.0
        for _ in range(rng.randint(1, 8)):
            now += rng.choice([0.0, 5.0, 40.0])
            if breaker.state == "open" and rng.random() < 0.5:
                _, breaker = admit(breaker, POLICY, now + POLICY.cooldown_s)
            calls = rng.randint(1, 6)
            failures = rng.randint(0, calls)
            one_by_one = breaker
            for number in range(calls):
                one_by_one = record(one_by_one, POLICY, now, failed=number < failures)
            breaker = record_many(breaker, POLICY, now, calls=calls, failures=failures)
            assert breaker == one_by_one
