"""Deadlines on a fake clock (nothing sleeps), budget arithmetic, the caller's timeout."""

import math
import time

import pytest

from retrieval.bounds.deadline import (
    BudgetPolicy,
    Budgets,
    Deadline,
    SearchDeadline,
    parse_caller_timeout,
    plan_budgets,
)
from retrieval.query.parse import BadQueryError
from tests.factories import FakeClock

POLICY = BudgetPolicy(
    objective_ms=800, caller_cap_ms=5000, reserve_ms=100, vector_budget_ms=400, min_vector_ms=50
)


def test_a_deadline_counts_down_on_its_clock() -> None:
    clock = FakeClock()
    deadline = Deadline.after(250, clock=clock)
    assert deadline.at == pytest.approx(1000.25)
    assert deadline.remaining_ms() == pytest.approx(250)
    assert not deadline.expired()
    clock.advance_ms(100)
    assert deadline.remaining_ms() == pytest.approx(150)
    assert not deadline.expired()


def test_a_deadline_expires_at_its_instant_and_never_goes_negative() -> None:
    clock = FakeClock(now=10.0)
    deadline = Deadline(at=10.5, clock=clock)
    clock.now = 10.5
    assert deadline.expired()
    assert deadline.remaining_ms() == 0
    clock.advance_ms(1000)
    assert deadline.expired()
    assert deadline.remaining_ms() == 0


def test_a_zero_deadline_is_already_expired() -> None:
    assert Deadline.after(0, clock=FakeClock()).expired()


def test_the_default_clock_is_monotonic() -> None:
    deadline = Deadline.after(60_000)
    assert deadline.clock is time.monotonic
    assert 59_000 < deadline.remaining_ms() <= 60_000


def test_without_a_caller_timeout_our_objective_is_shared_out() -> None:
    assert plan_budgets(POLICY, caller_timeout_ms=None) == Budgets(
        total_ms=800,
        caller_limited=False,
        lexical_ms=700,
        vector_ms=400,
        vector_skipped_no_budget=False,
    )


def test_a_shorter_caller_timeout_binds_and_shrinks_every_stage() -> None:
    assert plan_budgets(POLICY, caller_timeout_ms=300) == Budgets(
        total_ms=300,
        caller_limited=True,
        lexical_ms=200,
        vector_ms=200,
        vector_skipped_no_budget=False,
    )


@pytest.mark.parametrize("caller_ms", [800, 2000, 5000, 1e12, math.inf])
def test_a_caller_timeout_at_or_above_the_objective_changes_nothing(caller_ms: float) -> None:
    assert plan_budgets(POLICY, caller_timeout_ms=caller_ms) == plan_budgets(
        POLICY, caller_timeout_ms=None
    )


def test_the_caller_cap_bounds_what_a_caller_may_ask_for() -> None:
    policy = BudgetPolicy(
        objective_ms=800, caller_cap_ms=500, reserve_ms=100, vector_budget_ms=400, min_vector_ms=50
    )
    budgets = plan_budgets(policy, caller_timeout_ms=math.inf)
    assert budgets.total_ms == 500
    assert budgets.caller_limited
    assert budgets.lexical_ms == 400
    assert not plan_budgets(policy, caller_timeout_ms=None).caller_limited


def test_vector_is_skipped_when_less_than_its_minimum_is_left() -> None:
    tight = plan_budgets(POLICY, caller_timeout_ms=149)  # 49 ms after the reserve
    assert tight.vector_skipped_no_budget
    assert tight.vector_ms == 0
    assert tight.lexical_ms == 49
    at_minimum = plan_budgets(POLICY, caller_timeout_ms=150)
    assert not at_minimum.vector_skipped_no_budget
    assert at_minimum.vector_ms == 50


@pytest.mark.parametrize("caller_ms", [0, 50, 100])
def test_a_timeout_within_the_reserve_leaves_no_stage_any_time(caller_ms: float) -> None:
    assert plan_budgets(POLICY, caller_timeout_ms=caller_ms) == Budgets(
        total_ms=caller_ms,
        caller_limited=True,
        lexical_ms=0,
        vector_ms=0,
        vector_skipped_no_budget=True,
    )


def test_a_vector_minimum_above_its_budget_always_skips_it() -> None:
    policy = BudgetPolicy(
        objective_ms=800, caller_cap_ms=5000, reserve_ms=100, vector_budget_ms=40, min_vector_ms=50
    )
    assert plan_budgets(policy, caller_timeout_ms=None).vector_skipped_no_budget


@pytest.mark.parametrize(
    ("param", "header", "expected"),
    [
        (None, None, None),
        ("", "", None),
        ("250", None, 250.0),
        (None, "300", 300.0),
        ("250", "300", 250.0),
        ("", "300", 300.0),
        ("0", None, 0.0),
        ("250.5", None, 250.5),
        ("0007", None, 7.0),
        ("9" * 400, None, math.inf),  # plan_budgets caps it
    ],
)
def test_the_caller_timeout_comes_from_the_param_else_the_header(
    param: str | None, header: str | None, expected: float | None
) -> None:
    assert parse_caller_timeout(param, header) == expected


@pytest.mark.parametrize(
    "raw", ["-1", "-0", "+5", "abc", "1e3", "nan", "NaN", "inf", "Infinity", " 250", "250 ",
            "250ms", ".5", "5.", "0x10", "1_000", "\u0661\u0660\u0660", "\uff15"]
)  # fmt: skip
def test_a_caller_timeout_that_is_not_a_plain_number_is_refused(raw: str) -> None:
    with pytest.raises(BadQueryError, match=r"^timeout_ms must be a number of milliseconds"):
        parse_caller_timeout(raw, None)
    with pytest.raises(BadQueryError, match=r"^X-Request-Timeout-Ms must be a number"):
        parse_caller_timeout(None, raw)


def test_a_bad_param_is_refused_even_with_a_good_header() -> None:
    with pytest.raises(BadQueryError, match=r"^timeout_ms"):
        parse_caller_timeout("soon", "300")


def test_a_search_deadline_counts_its_instants_and_its_age_from_one_start() -> None:
    clock = FakeClock()
    deadline = SearchDeadline.start(plan_budgets(POLICY, caller_timeout_ms=None), clock=clock)
    assert deadline.end.remaining_ms() == pytest.approx(800)
    assert deadline.stages.remaining_ms() == pytest.approx(700)
    assert deadline.vector is not None
    assert deadline.vector.remaining_ms() == pytest.approx(400)
    clock.advance_ms(40)
    assert deadline.elapsed_ms() == pytest.approx(40)
    assert deadline.end.remaining_ms() == pytest.approx(760)


def test_a_planned_deadline_is_the_caller_s_budgets_counted_from_arrival() -> None:
    arrived_at = time.monotonic() - 0.010  # queued for 10 ms before anyone looked
    deadline = SearchDeadline.planned(POLICY, caller_timeout_ms=600, arrived_at=arrived_at)
    budgets = plan_budgets(POLICY, caller_timeout_ms=600)
    assert deadline.caller_limited
    assert deadline.end.at == pytest.approx(arrived_at + budgets.total_ms / 1000)
    assert deadline.stages.at == pytest.approx(arrived_at + budgets.lexical_ms / 1000)
    assert deadline.vector is not None
    assert deadline.vector.at == pytest.approx(arrived_at + budgets.vector_ms / 1000)
