"""One value per process, made on first use in each. A forked child (a Celery pool
process) inherits its parent's objects but not the threads behind them (a thread pool's, an
onnxruntime session's), and must not share the parent's connections: it makes its own
instead of using what it inherited."""

import os
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class PerProcess(Generic[T]):
    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make
        self._value: T | None = None
        self._pid = 0  # the process that made `_value`; 0: none yet
        self._lock = threading.Lock()
        # A lock another thread held at the fork stays held in the child, forever.
        os.register_at_fork(after_in_child=self._unlock)

    def _unlock(self) -> None:
        self._lock = threading.Lock()

    def get(self) -> T:
        """This process's value, made now if it has none (once, whatever the threads)."""
        pid = os.getpid()
        if self._pid != pid:
            with self._lock:
                if self._pid != pid:
                    self._value, self._pid = self._make(), pid
        assert self._value is not None
        return self._value

    def made(self) -> T | None:
        """This process's value, or None if it made none."""
        return self._value if self._pid == os.getpid() else None

    def forget(self) -> T | None:
        """This process's value (None if it made none), no longer kept: the next `get`
        makes another. What it holds is the caller's to close."""
        with self._lock:
            value = self.made()
            self._value, self._pid = None, 0
        return value
