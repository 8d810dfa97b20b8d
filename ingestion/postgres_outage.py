"""A task's work tried again in the task while Postgres cannot be reached.

A task that could not reach Postgres changed nothing (a batch is one transaction, and
applying it again changes nothing either), so it is tried again until Postgres is back
rather than acknowledged as failed, which would lose the batch. It waits in the task, not
as a Celery countdown: a countdown is a message the worker holds unacknowledged until it
is due, and a worker holding one when the broker's connection was lost exited instead of
reconnecting (kombu 5.7's Redis transport, restoring the held message with its connection
already gone: "'NoneType' object has no attribute 'hostname'"). A task that runs holds
only the message it runs, which survives a lost connection."""

import functools
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from typing import Any, ParamSpec, TypeVar

from celery import shared_task
from django.db import DatabaseError, InterfaceError, OperationalError, connection

logger = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

UNREACHABLE = (OperationalError, InterfaceError)
# Each delivery tries for this long, after 1, 2, 4 ... s, at most 30 s apart; then the task
# is retried at once (a new message, no countdown), up to `RETRIES` times: about ten
# minutes in all, well inside the task's soft time limit each time.
WAIT_S = 60.0
FIRST_PAUSE_S = 1.0
LONGEST_PAUSE_S = 30.0
RETRIES = 10


def task_outliving_postgres_outages(work: Callable[P, R]) -> Any:
    """A Celery task of `work`: tried in the task while Postgres cannot be reached
    (`tried_until_postgres_answers`), and what is still unreachable after a delivery's wait
    retried at once, as a new message. One decorator, so that no task has one half."""
    options: dict[str, Any] = {
        "autoretry_for": UNREACHABLE,
        "retry_kwargs": {"countdown": 0},
        "max_retries": RETRIES,
    }
    return shared_task(**options)(tried_until_postgres_answers(work))


def tried_until_postgres_answers(
    work: Callable[P, R],
    *,
    within_s: float = WAIT_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Callable[P, R]:
    """`work`, tried again after pauses while it fails for want of Postgres, for at most
    `within_s`; then its last error is raised."""

    @functools.wraps(work)
    def tried(*args: P.args, **kwargs: P.kwargs) -> R:
        end = clock() + within_s
        pauses = _pauses()
        while True:
            try:
                return work(*args, **kwargs)
            except UNREACHABLE as exc:
                left = end - clock()
                if left <= 0:
                    raise
                logger.warning("Postgres unreachable (%s): trying again", type(exc).__name__)
                _drop_connection()
                sleep(min(next(pauses), left))

    return tried


def _pauses() -> Iterator[float]:
    pause = FIRST_PAUSE_S
    while True:
        yield pause
        pause = min(pause * 2, LONGEST_PAUSE_S)


def _drop_connection() -> None:
    """The broken connection is not the next attempt's: it opens its own."""
    with suppress(DatabaseError):
        connection.close()
