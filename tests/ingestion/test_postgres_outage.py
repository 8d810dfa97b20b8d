"""A task's work tried again in the task while Postgres cannot be reached: after growing
pauses, for a bounded time, then its error raised (for Celery to retry the task at once).
The clock and the sleep are the test's, so no time passes."""

from collections.abc import Callable

import pytest
from django.db import OperationalError

from ingestion.postgres_outage import tried_until_postgres_answers
from tests.factories import FakeClock


class Clock(FakeClock):
    """A fake clock that also keeps what it was asked to sleep."""

    def __init__(self) -> None:
        super().__init__(0.0)
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.advance(seconds)


def failing(times: int, clock: Clock) -> tuple[list[float], Callable[[str], str]]:
    attempts: list[float] = []

    def work(value: str) -> str:
        attempts.append(clock.now)
        if len(attempts) <= times:
            raise OperationalError("connection refused")
        return value

    return attempts, work


def test_work_is_tried_again_after_growing_pauses_until_postgres_answers() -> None:
    clock = Clock()
    attempts, work = failing(4, clock)
    tried = tried_until_postgres_answers(work, clock=clock, sleep=clock.sleep)
    assert tried("applied") == "applied"
    assert clock.slept == [1.0, 2.0, 4.0, 8.0]
    assert attempts == [0.0, 1.0, 3.0, 7.0, 15.0]


def test_work_still_failing_at_the_end_of_its_wait_raises_for_the_task_to_be_retried() -> None:
    clock = Clock()
    attempts, work = failing(100, clock)
    tried = tried_until_postgres_answers(work, within_s=60, clock=clock, sleep=clock.sleep)
    with pytest.raises(OperationalError):
        tried("applied")
    # The pauses double up to 30 s apart; the last is cut to end the wait on time, and the
    # work is tried once more at its end.
    assert clock.slept == [1.0, 2.0, 4.0, 8.0, 16.0, 29.0]
    assert attempts[-1] == 60.0


def test_other_errors_are_not_waited_out() -> None:
    clock = Clock()

    def work() -> None:
        raise ValueError("a bad record")

    with pytest.raises(ValueError, match="a bad record"):
        tried_until_postgres_answers(work, clock=clock, sleep=clock.sleep)()
    assert clock.slept == []
