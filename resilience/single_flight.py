"""One task in flight per event loop for work many callers want at the same moment (the
refresh of a value cached for a second): the first caller starts it, the others are given
the same task while it runs. Per loop, because a task belongs to its loop and a process can
run several (the web server's, a warm-up's, a test's); weakly keyed, so a loop that ends
takes its task with it."""

import asyncio
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class SingleFlight(Generic[T]):
    def __init__(self) -> None:
        self._running: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task[T]] = (
            weakref.WeakKeyDictionary()
        )

    def run(self, work: Callable[[], Coroutine[Any, Any, T]], name: str) -> "asyncio.Task[T]":
        """The task running `work` on this loop: started now unless one already runs."""
        loop = asyncio.get_running_loop()
        running = self._running.get(loop)
        if running is None:
            running = loop.create_task(work(), name=name)
            self._running[loop] = running
            running.add_done_callback(self._done)
        return running

    def _done(self, task: "asyncio.Task[T]") -> None:
        self._running.pop(task.get_loop(), None)
        if not task.cancelled():
            task.exception()  # retrieved: every caller may have stopped waiting for it
