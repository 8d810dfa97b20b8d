"""The key formats' readers and writers agree: a generation's pattern finds every ranking
cached for it and none of another generation's (the budget sweep clears one generation's
cache with it)."""

from fnmatch import fnmatchcase

from resilience import redis_keys


def test_a_generation_s_pattern_matches_its_rankings_only() -> None:
    mine = redis_keys.cached_ranking(12, 10, "ab" * 16)
    assert fnmatchcase(mine, redis_keys.cached_rankings_of(12))
    assert not fnmatchcase(mine, redis_keys.cached_rankings_of(1))
    assert not fnmatchcase(
        redis_keys.cached_ranking(120, 10, "cd"), redis_keys.cached_rankings_of(12)
    )
