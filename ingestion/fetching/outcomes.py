"""What a fetch returns, or raises when it cannot deliver a payload."""

from dataclasses import dataclass


@dataclass(frozen=True)
class FetchResult:
    body: bytes | None  # None when the source said "not modified"
    not_modified: bool
    etag: str  # validators to send next time; empty when the source gave none
    last_modified: str
    status: int
    elapsed_s: float


class FetchError(Exception):
    """A fetch that failed, and whether trying again later could help.

    Permanent (the source itself is wrong: 404, a refused address, an oversized payload)
    quarantines or disables the source; transient (timeouts, connection errors, 5xx, 429)
    feeds its circuit breaker. `slow` marks timeouts, so a source that stalls is told apart
    from one that refuses.
    """

    def __init__(self, reason: str, *, permanent: bool, slow: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.permanent = permanent
        self.slow = slow
