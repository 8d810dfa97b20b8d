"""Awaiting work a caller may stop waiting for: a search's stages, which it abandons at
their budgets, and the writes it leaves running behind its response.

Invariants: a task abandoned here never has its failure reported by asyncio as never
retrieved (it is expected, and the caller has accounted for it); work behind a response is
kept referenced until it finishes, and `writes_done()` waits for this event loop's."""

import asyncio
from typing import Any


def start(coroutine: Any, name: str) -> "asyncio.Task[Any]":
    task = asyncio.create_task(coroutine, name=name)
    task.add_done_callback(_retrieve)
    return task


async def settle(task: "asyncio.Task[Any]", timeout_ms: float) -> bool:
    """Wait up to `timeout_ms` for a task; True when it finished (with a result or not)."""
    if timeout_ms > 0:
        await asyncio.wait({task}, timeout=timeout_ms / 1000)
    return task.done()


def cancel(*tasks: "asyncio.Task[Any] | None") -> None:
    for task in tasks:
        if task is not None and not task.done():
            task.cancel()


def _retrieve(task: "asyncio.Task[Any]") -> None:
    """An abandoned stage may still fail after we stopped waiting; that is expected and
    already accounted for, so don't let asyncio report it as never retrieved."""
    if not task.cancelled():
        task.exception()


# Work behind responses (cache writes, warming enqueues) still running, kept referenced
# until it finishes.
_writes: "set[asyncio.Task[Any]]" = set()


def behind_response(coroutine: Any) -> None:
    finish_behind(start(coroutine, "behind-response"))


def finish_behind(task: "asyncio.Task[Any]") -> None:
    """Let a started task no one waits for any more run to its end, behind the response."""
    _writes.add(task)
    task.add_done_callback(_writes.discard)


async def writes_done() -> None:
    """Wait for the work behind responses this event loop has started."""
    loop = asyncio.get_running_loop()
    mine = [task for task in _writes if task.get_loop() is loop]
    if mine:
        await asyncio.wait(mine)
