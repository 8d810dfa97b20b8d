"""An event loop kept in a thread of its own, for synchronous callers (Celery tasks) whose
coroutines should share one pool of Postgres connections and one Redis client instead of
opening their own each time."""

import asyncio
import threading
from collections.abc import Coroutine
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from resilience.per_process import PerProcess
from retrieval.cache import close_async_redis
from retrieval.pg.pool import close_pool

T = TypeVar("T")


@dataclass(frozen=True)
class _Running:
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread


def _started(name: str) -> _Running:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name=name, daemon=True)
    thread.start()
    return _Running(loop, thread)


class KeptLoop:
    """An event loop in a thread of its own, which the coroutines given to `run` share,
    and with it the pool of Postgres connections and the Redis client it opens. One per
    process: a forked child (Celery's pool) has the parent's loop object but not its
    thread.

    A loop per task (`asyncio.run`) closed its pool with it, so every task opened new
    connections: a backend forked, its caches cold, for every search warmed. That cost
    38-45 ms of Postgres CPU per task against 7.5-8 ms on a kept loop, at up to 5 tasks a
    second per web process, just when searches were timing out: the extra load turned a
    few timeouts into seconds in which nearly every search fell back (docs/reliability.md).
    """

    def __init__(self, name: str) -> None:
        self._running = PerProcess(partial(_started, name))

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._running.get().loop).result()

    def stop(self) -> None:
        """Close the loop's pool and Redis client, then the loop (a worker process's
        shutdown; a test's end)."""
        running = self._running.forget()
        if running is None:
            return
        asyncio.run_coroutine_threadsafe(close_loop_clients(), running.loop).result()
        running.loop.call_soon_threadsafe(running.loop.stop)
        running.thread.join()
        running.loop.close()


async def close_loop_clients() -> None:
    """Close this event loop's pool and Redis client: a task's loop ends with it."""
    await close_pool()
    await close_async_redis()
