"""An event loop kept in a thread of its own, for synchronous callers (Celery tasks) whose
coroutines should share one pool of Postgres connections and one Redis client instead of
opening their own each time."""

import asyncio
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from retrieval.cache import close_async_redis
from retrieval.pg.pool import close_pool

T = TypeVar("T")


class KeptLoop:
    """An event loop in a thread of its own, which the coroutines given to `run` share,
    and with it the pool of Postgres connections and the Redis client it opens.

    A loop per task (`asyncio.run`) closed its pool with it, so every task opened new
    connections: a backend forked, its caches cold, for every search warmed. That cost
    38-45 ms of Postgres CPU per task against 7.5-8 ms on a kept loop, at up to 5 tasks a
    second per web process, just when searches were timing out: the extra load turned a
    few timeouts into seconds in which nearly every search fell back (docs/reliability.md).
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid: int | None = None

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._running()).result()

    def _running(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            # A forked child (Celery's pool) has the parent's loop object but not its thread.
            if self._loop is None or self._pid != os.getpid():
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=self._loop.run_forever, name=self._name, daemon=True
                )
                self._thread.start()
                self._pid = os.getpid()
            return self._loop

    def stop(self) -> None:
        """Close the loop's pool and Redis client, then the loop (a worker process's
        shutdown; a test's end)."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop, self._thread = None, None
            if loop is None or thread is None or self._pid != os.getpid():
                return
            asyncio.run_coroutine_threadsafe(close_loop_clients(), loop).result()
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()


async def close_loop_clients() -> None:
    """Close this event loop's pool and Redis client: a task's loop ends with it."""
    await close_pool()
    await close_async_redis()
