"""A token bucket: at most `rate` events a second on average, `burst` at once.

Hand-written rather than taken from a rate-limiting library: it is one process's bound on
one kind of optional work, taken on the event loop and never shared, so it needs neither
a lock nor a storage backend, only an injectable clock for its tests."""

import time
from collections.abc import Callable


class TokenBucket:
    def __init__(
        self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if rate < 0 or burst < 0:
            raise ValueError(f"a bucket needs rate and burst >= 0, got {rate}, {burst}")
        self._rate, self._burst, self._clock = rate, burst, clock
        self._tokens = burst
        self._at = clock()

    def take(self) -> bool:
        """Take a token if there is one: True when the event may happen now."""
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._at) * self._rate)
        self._at = now
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True
