"""Model work that searches leave time for runs on a thread of Linux's SCHED_IDLE class.

A slice the pacer lets through (ingestion/pacing.py) still holds a core for tens of
milliseconds once it starts: a search whose thread wakes meanwhile waits for the time
slice the kernel gives the model, and at 40 searches a second a trickle of 5 listings a
second moved their p99 by +21 % to +67 % in five runs. On a SCHED_IDLE thread the kernel
runs the model only on a core nothing else wants and hands the core to a waking search at
once: +26 % and +6 % in two runs, quiet and trickle steps alternated (docs/reliability.md,
"Vector work beside searches").

While searches keep both cores busy, though, a SCHED_IDLE thread gets next to nothing (a
weight of 3 against a normal thread's 1,024), and the pacer's floor, which keeps the vector
lag bounded then, would not hold. So the caller watches the idle thread's CPU time: when
it got less than STARVED_SHARE of a core over a patience, the caller does the work itself,
in its normal class (niced, as the worker is), and the idle thread's copy is dropped:
cancelled if it had not started, else left to end on cores no one wants, where it costs
searches nothing. A slice the pacer lets through is then late by about the patience.
Two threads rather than one switching class: entering SCHED_IDLE is always allowed, leaving
it needs CAP_SYS_NICE or an RLIMIT_NICE that containers rarely grant. The work must be safe
to run twice at once (an onnxruntime session's run is).
"""

import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from ingestion import metrics
from resilience.per_process import PerProcess

T = TypeVar("T")
logger = logging.getLogger(__name__)

# Below this share of a core over a patience, the idle thread is starved.
STARVED_SHARE = 0.25


class _IdleThread:
    def __init__(self) -> None:
        self._clock = 0
        self.executor = ThreadPoolExecutor(1, "idle-cores", initializer=self._enter_idle_class)
        self.executor.submit(lambda: None).result()  # the thread is up, its clock known

    def _enter_idle_class(self) -> None:
        self._clock = time.pthread_getcpuclockid(threading.get_ident())
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        except OSError as exc:  # a sandbox that forbids it: the worker's own priority, then
            logger.warning("model work stays at the worker's priority (%s)", exc.strerror)

    def cpu_s(self) -> float:
        return time.clock_gettime(self._clock)


_thread = PerProcess(_IdleThread)


def on_idle_cores(
    work: Callable[[], T], patience_s: float, charge: Callable[[float], None] = lambda s: None
) -> T:
    """`work`'s result, computed on this process's SCHED_IDLE thread, or by the caller once
    that thread got less than STARVED_SHARE of a core over `patience_s`; the seconds the
    caller then spent on it, in its own class, go to `charge`."""
    thread = _thread.get()
    idle = thread.executor.submit(work)
    cpu_s, at = thread.cpu_s(), time.monotonic()
    while True:
        try:
            return idle.result(timeout=patience_s)
        except TimeoutError:
            now_cpu_s, now = thread.cpu_s(), time.monotonic()
            if now_cpu_s - cpu_s < STARVED_SHARE * (now - at):
                idle.cancel()
                metrics.IDLE_STARVED.inc()
                started = time.monotonic()
                try:
                    return work()
                finally:
                    charge(time.monotonic() - started)
            cpu_s, at = now_cpu_s, now
