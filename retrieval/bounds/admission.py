"""A bound on in-flight vector searches in this process.

Past the bound a search sheds its vector stage (reason `shed`) instead of queueing behind
searches that are already slow. Acquiring never blocks.

Only a slot that was granted can be given back: `try_acquire()` returns a `Slot` (or None)
and the slot releases itself, at most once; `slot()` does both around a block. There is no
`release()` on the limit, so no code path can free capacity it never took.

Thread-safe: one lock guards the count and every slot's release, and it is never held
across an `await`, so one limit can serve an event loop and threads of the same process.
"""

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType


class AdmissionLimit:
    def __init__(self, limit: int) -> None:
        if limit < 0:
            raise ValueError(f"an admission limit cannot be negative, got {limit}")
        self._limit = limit  # 0 sheds every vector search: a kill switch
        self._in_flight = 0
        self._lock = threading.Lock()

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def try_acquire(self) -> "Slot | None":
        """A slot if one is free, else None (shed). Release it when the search ends."""
        with self._lock:
            if self._in_flight >= self._limit:
                return None
            self._in_flight += 1
            return Slot(self)

    @contextmanager
    def slot(self) -> Iterator[bool]:
        """`with limit.slot() as admitted:` holds a slot for the block if one was free."""
        held = self.try_acquire()
        try:
            yield held is not None
        finally:
            if held is not None:
                held.release()

    def _release(self, slot: "Slot") -> None:
        with self._lock:
            if slot._held:
                slot._held = False
                self._in_flight -= 1


class Slot:
    """One granted place among the in-flight vector searches; only `AdmissionLimit`
    makes them. Releasing twice gives the place back once."""

    __slots__ = ("_held", "_owner")

    def __init__(self, owner: AdmissionLimit) -> None:
        self._owner = owner
        self._held = True

    @property
    def held(self) -> bool:
        return self._held

    def release(self) -> None:
        self._owner._release(self)

    def __enter__(self) -> "Slot":
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()


class Unlimited:
    """The admission of a search that counts against no limit (cache warming, which runs
    in a worker, off the request path)."""

    def try_acquire(self) -> "Unlimited":
        return self

    def release(self) -> None:
        pass
