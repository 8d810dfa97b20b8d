"""The search's front door, one per web process: a bound on the searches in flight here,
and whether it has turned any away lately.

Past the bound a search request is answered 503 with Retry-After before Django sees it
(searchsite/handler.py), in well under a millisecond, instead of joining the requests that
already share this process's event loop and the database: admitted past what the machine
can serve, every request was late, and completed throughput fell by half
(docs/reliability.md has the measurement that chose the bound and the mechanism).

While the door is turning requests away, nothing optional is started: cache warming
(retrieval/service.py) would spend the capacity the shed requests could not get.
"""

import time
from collections.abc import Callable

from retrieval.bounds.admission import AdmissionLimit, Slot

# A door that shed within this long counts as shedding: warming stays off through a
# burst's gaps, and comes back a moment after the last request was turned away.
SHEDDING_HOLD_S = 2.0


class Door:
    def __init__(self, limit: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._admission = AdmissionLimit(limit)
        self._clock = clock
        self._last_shed: float | None = None

    @property
    def in_flight(self) -> int:
        return self._admission.in_flight

    def try_enter(self) -> Slot | None:
        """A place among the searches in flight (release it when the response is sent),
        or None: turn the request away."""
        slot = self._admission.try_acquire()
        if slot is None:
            self._last_shed = self._clock()
        return slot

    def shedding(self) -> bool:
        shed = self._last_shed
        return shed is not None and self._clock() - shed < SHEDDING_HOLD_S
