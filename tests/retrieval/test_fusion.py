"""Reciprocal rank fusion: hand-computed orders, exact ties, and independence of input order."""

import random
from collections.abc import Mapping, Sequence
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrieval.fusion import reciprocal_rank_fusion

RANKINGS = st.dictionaries(
    st.sampled_from(["lexical", "vector", "cache", "editorial"]),
    st.lists(st.integers(min_value=1, max_value=40), max_size=30),
    max_size=4,
)


def _by_fractions(
    rankings: Mapping[str, Sequence[int]],
    k: int,
    limit: int,
    weights: Mapping[str, int] | None = None,
) -> list[int]:
    """The definition, computed the slow, obviously exact way."""
    scores: dict[int, Fraction] = {}
    for stage, ids in rankings.items():
        weight = (weights or {}).get(stage, 1)
        for rank, listing_id in enumerate(dict.fromkeys(ids), start=1):
            term = Fraction(weight, k + rank)
            scores[listing_id] = scores.get(listing_id, Fraction(0)) + term
    return sorted(scores, key=lambda listing_id: (-scores[listing_id], listing_id))[:limit]


def test_it_fuses_by_summed_reciprocal_ranks() -> None:
    # 1: 1/61 + 1/62, 3: 1/63 + 1/61, 2: 1/62, 4: 1/63
    fused, matched = reciprocal_rank_fusion({"lexical": [1, 2, 3], "vector": [3, 1, 4]}, limit=10)
    assert fused == [1, 3, 2, 4]
    assert matched == {
        1: {"lexical", "vector"},
        3: {"lexical", "vector"},
        2: {"lexical"},
        4: {"vector"},
    }


@pytest.mark.parametrize(
    ("k", "expected"),
    [
        (60, [20, 10, 30, 40]),  # 20: 1/62 + 1/63 beats 10 and 30: 1/61 each
        (0, [10, 30, 20, 40]),  # 10 and 30: 1/1 each beat 20: 1/2 + 1/3
    ],
)
def test_k_sets_how_much_agreement_outweighs_a_top_rank(k: int, expected: list[int]) -> None:
    rankings = {"lexical": [10, 20], "vector": [30, 40, 20]}
    assert reciprocal_rank_fusion(rankings, k=k, limit=10)[0] == expected


def test_equal_scores_go_to_the_smaller_id() -> None:
    assert reciprocal_rank_fusion({"lexical": [5], "vector": [3]}, limit=10)[0] == [3, 5]
    assert reciprocal_rank_fusion({"lexical": [9, 4], "vector": [4, 9]}, limit=10)[0] == [4, 9]


def test_a_tie_is_exact_even_where_floats_would_break_it() -> None:
    # 1/(60+45) + 1/(60+150) == 1/(60+10) exactly, but the float sum is one ulp larger.
    assert 1 / 105 + 1 / 210 > 1 / 70
    vector = list(range(1000, 1150))
    vector[10 - 1], vector[150 - 1] = 2, 9
    lexical = list(range(2000, 2045))
    lexical[45 - 1] = 9
    fused, _ = reciprocal_rank_fusion({"lexical": lexical, "vector": vector}, limit=500)
    assert fused.index(2) + 1 == fused.index(9)


def test_a_repeated_id_counts_once_at_its_first_position() -> None:
    repeated = reciprocal_rank_fusion({"lexical": [7, 7, 8, 7], "vector": [8]}, limit=10)
    assert repeated == reciprocal_rank_fusion({"lexical": [7, 8], "vector": [8]}, limit=10)
    assert repeated[0] == [8, 7]


def test_empty_rankings_fuse_to_nothing() -> None:
    assert reciprocal_rank_fusion({}, limit=10) == ([], {})
    assert reciprocal_rank_fusion({"lexical": [], "vector": []}, limit=10) == ([], {})
    fused, matched = reciprocal_rank_fusion({"lexical": [4, 2], "vector": []}, limit=10)
    assert fused == [4, 2]
    assert matched == {4: {"lexical"}, 2: {"lexical"}}


def test_limit_truncates_and_matched_covers_only_returned_ids() -> None:
    rankings = {"lexical": [1, 2, 3], "vector": [3, 1, 4]}
    assert reciprocal_rank_fusion(rankings, limit=2) == (
        [1, 3],
        {1: {"lexical", "vector"}, 3: {"lexical", "vector"}},
    )
    assert reciprocal_rank_fusion(rankings, limit=0) == ([], {})


def test_negative_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        reciprocal_rank_fusion({"lexical": [1]}, limit=-1)
    with pytest.raises(ValueError, match="must not be negative"):
        reciprocal_rank_fusion({"lexical": [1]}, k=-1, limit=1)
    with pytest.raises(ValueError, match="must not be negative"):
        reciprocal_rank_fusion({"lexical": [1]}, limit=1, weights={"lexical": -1})


def test_a_hole_keeps_the_ranks_of_the_ids_after_it() -> None:
    # 3 is lexical's third: 1/63 against the cache's 2 at 1/62 and 4 at 1/63.
    fused, matched = reciprocal_rank_fusion(
        {"cache": [1, 2, 4], "lexical": [None, None, 3, None]}, limit=4
    )
    assert fused == [1, 2, 3, 4]
    assert matched[3] == {"lexical"}
    # Without the holes it would be lexical's first, level with the cache's first.
    assert reciprocal_rank_fusion({"cache": [1, 2, 4], "lexical": [3]}, limit=4)[0] == [
        1,
        3,
        2,
        4,
    ]


def test_a_heavier_stage_wins_where_plain_fusion_would_tie() -> None:
    rankings = {"lexical": [1, 2], "vector": [2, 1]}
    assert reciprocal_rank_fusion(rankings, limit=2)[0] == [1, 2]  # a tie: smaller id
    assert reciprocal_rank_fusion(rankings, limit=2, weights={"vector": 3, "lexical": 2})[0] == [
        2,
        1,
    ]


@given(
    RANKINGS,
    st.integers(min_value=0, max_value=100),
    st.dictionaries(st.sampled_from(["lexical", "vector"]), st.integers(0, 5), max_size=2),
)
def test_weighted_fusion_matches_the_definition(
    rankings: dict[str, list[int]], k: int, weights: dict[str, int]
) -> None:
    fused, _ = reciprocal_rank_fusion(rankings, k=k, limit=50, weights=weights)
    assert fused == _by_fractions(rankings, k, 50, weights)


@given(RANKINGS, st.integers(min_value=0, max_value=100), st.integers(min_value=0, max_value=50))
def test_it_matches_the_definition(rankings: dict[str, list[int]], k: int, limit: int) -> None:
    fused, matched = reciprocal_rank_fusion(rankings, k=k, limit=limit)
    assert fused == _by_fractions(rankings, k, limit)
    assert list(matched) == fused
    for listing_id, stages in matched.items():
        assert stages == {stage for stage, ids in rankings.items() if listing_id in ids}


@given(RANKINGS, st.randoms(use_true_random=False), st.integers(min_value=0, max_value=50))
def test_the_order_stages_are_given_in_never_matters(
    rankings: dict[str, list[int]], rng: random.Random, limit: int
) -> None:
    items = list(rankings.items())
    rng.shuffle(items)
    shuffled = dict(items)
    assert reciprocal_rank_fusion(shuffled, limit=limit) == reciprocal_rank_fusion(
        rankings, limit=limit
    )
    fused, matched = reciprocal_rank_fusion(shuffled, limit=limit)
    assert list(matched) == fused  # matched follows the fused order too, not the input's
