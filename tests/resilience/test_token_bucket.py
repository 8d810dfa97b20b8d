"""The token bucket that bounds optional work (resilience/token_bucket.py), on a clock the
test moves."""

import pytest

from resilience.token_bucket import TokenBucket
from tests.factories import FakeClock


def takes(bucket: TokenBucket, times: int) -> int:
    return sum(bucket.take() for _ in range(times))


def test_a_full_bucket_gives_its_burst_at_once_then_refuses() -> None:
    bucket = TokenBucket(rate=5, burst=5, clock=FakeClock())
    assert takes(bucket, 8) == 5


def test_it_refills_at_its_rate() -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate=5, burst=5, clock=clock)
    takes(bucket, 5)
    clock.advance(0.1)  # half a token
    assert not bucket.take()
    clock.advance(0.1)  # a whole one
    assert bucket.take()
    assert not bucket.take()
    clock.advance(0.6)  # three
    assert takes(bucket, 5) == 3


def test_an_idle_bucket_holds_no_more_than_its_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate=5, burst=5, clock=clock)
    clock.advance(3600)
    assert takes(bucket, 100) == 5


def test_a_bucket_of_rate_zero_never_gives_a_token() -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate=0, burst=0, clock=clock)
    clock.advance(3600)
    assert not bucket.take()


def test_a_negative_rate_is_refused() -> None:
    with pytest.raises(ValueError, match="rate and burst"):
        TokenBucket(rate=-1, burst=1)
