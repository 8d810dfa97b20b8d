"""Reciprocal rank fusion of named rankings (e.g. "lexical" and "vector").

Invariant: the fused ranking depends only on what each stage ranked where, never on the order
the stages are given in nor on float rounding, and it returns only ids some stage found.
score(id) = sum over the stages that found it of w / (k + rank), w the stage's weight (1
unless given), with rank counted from 1 after dropping an id's repeats within a stage;
equal scores go to the smaller listing id."""

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache


def reciprocal_rank_fusion(
    rankings: Mapping[str, Sequence[int | None]],
    *,
    k: int = 60,
    limit: int,
    weights: Mapping[str, int] | None = None,
) -> tuple[list[int], dict[int, set[str]]]:
    """The fused ids, best first and at most `limit`, and the stages that found each.
    `weights` multiply a stage's terms (whole numbers, so scores stay exact; 1 for a stage
    not named). A None in a ranking holds its rank for an id left out, so the ids after it
    keep the ranks their stage gave them."""
    if k < 0 or limit < 0:
        raise ValueError("k and limit must not be negative")
    weight = weights or {}
    if any(w < 0 for w in weight.values()):
        raise ValueError("weights must not be negative")
    deduplicated = {stage: _first_places(ids) for stage, ids in rankings.items()}
    denominator = _common_denominator(k, max(map(len, deduplicated.values()), default=0))
    scores: dict[int, int] = {}
    found_by: dict[int, set[str]] = {}
    for stage, ids in deduplicated.items():
        for rank, listing_id in enumerate(ids, start=1):
            if listing_id is None:
                continue
            term = weight.get(stage, 1) * (denominator // (k + rank))
            scores[listing_id] = scores.get(listing_id, 0) + term
            found_by.setdefault(listing_id, set()).add(stage)
    fused = sorted(scores, key=lambda listing_id: (-scores[listing_id], listing_id))[:limit]
    return fused, {listing_id: found_by[listing_id] for listing_id in fused}


def _first_places(ids: Sequence[int | None]) -> list[int | None]:
    """The ranking with each id's repeats after its first place dropped, holes kept."""
    seen: set[int] = set()
    kept: list[int | None] = []
    for listing_id in ids:
        if listing_id is None or listing_id not in seen:
            kept.append(listing_id)
        if listing_id is not None:
            seen.add(listing_id)
    return kept


@lru_cache(maxsize=32)
def _common_denominator(k: int, longest: int) -> int:
    """Scores are exact integers over lcm(k+1, ..., k+longest). Float sums can differ in the
    last bit for equal scores (1/105 + 1/210 vs 1/70), and then a tie would not go to the id."""
    return math.lcm(*range(k + 1, k + longest + 1))
