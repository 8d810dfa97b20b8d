"""Model work that searches leave time for runs on a thread of Linux's SCHED_IDLE class.

A slice the pacer lets through (ingestion/pacing.py) still holds a core for tens of
milliseconds once it starts: a search whose thread wakes meanwhile waits for the time
slice the kernel gives the model, and at 40 searches a second a trickle of 5 listings a
second moved their p99 by +86 %. On a SCHED_IDLE thread the kernel runs the model only on
a core nothing else wants and hands the core to a waking search at once: +12 % with the
whole worker in that class, measured side by side (docs/reliability.md, "Vector work
beside searches").

The floor's slices do not run there: while searches keep both cores busy, a SCHED_IDLE
thread gets next to nothing (a weight of 3 against a normal thread's 1,024), and the floor
is what keeps the vector lag bounded then. So a process has two threads for the model:
its own, in its normal class, and this one. One thread switching class would not do:
entering SCHED_IDLE is always allowed, leaving it needs CAP_SYS_NICE or an RLIMIT_NICE
that containers rarely grant.
"""

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

_thread: ThreadPoolExecutor | None = None
_owner = 0  # the process the thread is in: a forked pool process starts its own


def _enter_idle_class() -> None:
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


def on_idle_cores(work: Callable[[], T]) -> T:
    """`work`'s result, computed on this process's SCHED_IDLE thread."""
    global _thread, _owner
    if _thread is None or _owner != os.getpid():
        _thread = ThreadPoolExecutor(1, "idle-cores", initializer=_enter_idle_class)
        _owner = os.getpid()
    return _thread.submit(work).result()
