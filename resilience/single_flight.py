"""One task in flight per event loop (and key) for work many callers want at the same moment
(the refresh of a value cached for a second, the facets of one set of filters): the first
caller starts it, the others are given the same task while it runs. Per loop, because a task
belongs to its loop and a process can run several (the web server's, a warm-up's, a
test's); weakly keyed, so a loop that ends takes its tasks with it."""

import asyncio
import weakref
from collections.abc import Callable, Coroutine, Hashable
from functools import partial
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class SingleFlight(Generic[T]):
    def __init__(self) -> None:
        self._running: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[Hashable, asyncio.Task[T]]
        ] = weakref.WeakKeyDictionary()

    def run(
        self, work: Callable[[], Coroutine[Any, Any, T]], name: str, key: Hashable = None
    ) -> "asyncio.Task[T]":
        """The task running `work` for `key` on this loop: started now unless one runs."""
        loop = asyncio.get_running_loop()
        tasks = self._running.setdefault(loop, {})
        running = tasks.get(key)
        if running is None:
            running = loop.create_task(work(), name=name)
            tasks[key] = running
            running.add_done_callback(partial(self._done, key))
        return running

    def forget(self) -> None:
        """The tasks running are no longer given to callers (they run on to their end)."""
        self._running = weakref.WeakKeyDictionary()

    def _done(self, key: Hashable, task: "asyncio.Task[T]") -> None:
        tasks = self._running.get(task.get_loop(), {})
        if tasks.get(key) is task:
            del tasks[key]
        if not task.cancelled():
            task.exception()  # retrieved: every caller may have stopped waiting for it
