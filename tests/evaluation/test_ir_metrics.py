"""The IR figures against a hand-worked example: cutoffs, rank order, unanswered queries,
queries with nothing relevant, and slices."""

from collections.abc import Mapping
from math import log2

import pytest

from evaluation.metrics import Figures, score_paths, slice_by

JUDGMENTS = {
    "q1": {"a", "b", "c"},
    "q2": {"d"},
    "q3": set(),  # nothing relevant: not scored
    "q4": {"e"},
}
# q2's one relevant document comes 11th: past every cutoff of 10.
ELEVENTH = [f"n{i}" for i in range(1, 11)] + ["d"]
RUNS = {
    "lexical": {"q1": ["x", "a", "y", "b"], "q2": ELEVENTH, "q3": ["a"], "q4": [], "q9": ["a"]},
    "vector": {"q1": ["c", "b", "a"], "q2": ["d"]},  # q4 left out
}

# lexical, q1: relevant a and b at ranks 2 and 4 of 3 relevant.
#   recall@10 = 2/3
#   DCG = 1/log2(2+1) + 1/log2(4+1) = 0.63093 + 0.43068 = 1.06161
#   IDCG (a, b, c at ranks 1-3) = 1/log2(2) + 1/log2(3) + 1/log2(4) = 1 + 0.63093 + 0.5 = 2.13093
#   nDCG@10 = 1.06161 / 2.13093 = 0.49819
#   MRR@10 = 1/2 (first relevant at rank 2)
# lexical, q2: d at rank 11, so 0 on all three; q4: nothing returned, 0 on all three.
# Means over q1, q2, q4 (q3 has nothing relevant, q9 is not judged):
#   recall@10 = (2/3) / 3 = 2/9, nDCG@10 = 0.49819 / 3 = 0.16606, MRR@10 = (1/2) / 3 = 1/6
LEXICAL_Q1_NDCG = (1 / log2(3) + 1 / log2(5)) / (1 + 1 / log2(3) + 1 / log2(4))
# vector: q1 and q2 perfect (1 on all three), q4 left out (0): every mean is 2/3.
ZERO = {"recall@10": 0.0, "ndcg@10": 0.0, "mrr@10": 0.0}
PERFECT = {"recall@10": 1.0, "ndcg@10": 1.0, "mrr@10": 1.0}


def close(figures: Figures) -> object:
    """Equal to `figures` within 1e-9, figure by figure."""
    return pytest.approx(figures, abs=1e-9)


def close_each(by_key: Mapping[str, Figures]) -> object:
    """Equal to `by_key` (query id or slice -> figures) within 1e-9."""
    return {key: close(figures) for key, figures in by_key.items()}


def test_it_scores_the_hand_worked_example() -> None:
    scores = score_paths(JUDGMENTS, RUNS)

    assert scores["lexical"].per_query == close_each(
        {
            "q1": {"recall@10": 2 / 3, "ndcg@10": LEXICAL_Q1_NDCG, "mrr@10": 1 / 2},
            "q2": ZERO,
            "q4": ZERO,
        }
    )
    assert scores["lexical"].means == close(
        {"recall@10": 2 / 9, "ndcg@10": LEXICAL_Q1_NDCG / 3, "mrr@10": 1 / 6}
    )
    # The figures come in one order, for a report's columns.
    assert list(scores["lexical"].means) == ["recall@10", "ndcg@10", "mrr@10"]
    assert scores["vector"].per_query == close_each({"q1": PERFECT, "q2": PERFECT, "q4": ZERO})
    assert scores["vector"].means == close({"recall@10": 2 / 3, "ndcg@10": 2 / 3, "mrr@10": 2 / 3})


def test_the_recall_cutoff_is_its_own() -> None:
    # recall@11 reaches q2's eleventh document; nDCG and MRR stay cut at 10.
    scores = score_paths(JUDGMENTS, RUNS, recall_k=11)

    assert scores["lexical"].per_query["q2"] == close(
        {"recall@11": 1.0, "ndcg@10": 0.0, "mrr@10": 0.0}
    )
    with pytest.raises(ValueError, match="at least 1"):
        score_paths(JUDGMENTS, RUNS, recall_k=0)


def test_the_order_given_is_the_order_scored() -> None:
    # trec_eval breaks score ties by document id (z before a), so equal scores would put
    # the relevant `a` second; a document listed again keeps its first place.
    scores = score_paths(
        {"q1": {"a"}}, {"given": {"q1": ["a", "z"]}, "repeated": {"q1": ["a", "z", "a"]}}
    )

    assert scores["given"].per_query["q1"] == close(PERFECT)
    assert scores["repeated"].per_query["q1"] == close(PERFECT)


def test_a_path_that_returns_nothing_scores_zero() -> None:
    scores = score_paths(JUDGMENTS, {"silent": {}, "empty": {"q1": [], "q2": [], "q4": []}})

    for path in ("silent", "empty"):
        assert scores[path].per_query == {"q1": ZERO, "q2": ZERO, "q4": ZERO}
        assert scores[path].means == ZERO


def test_a_query_with_nothing_relevant_is_not_scored() -> None:
    # Had q3 (nothing relevant, found "a") counted as 0, vector's means would be 2/4, not
    # 2/3; counted as 1, 3/4.
    scores = score_paths(JUDGMENTS, {"vector": {**RUNS["vector"], "q3": ["a"]}})

    assert "q3" not in scores["vector"].per_query
    assert scores["vector"].means == close({"recall@10": 2 / 3, "ndcg@10": 2 / 3, "mrr@10": 2 / 3})
    with pytest.raises(ValueError, match="no judged query has a relevant document"):
        score_paths({"q3": set()}, RUNS)


def test_it_slices_by_the_label_each_query_is_given() -> None:
    # vector: q1 perfect alone in its slice; q2 perfect and q4 zero share theirs.
    per_query = score_paths(JUDGMENTS, RUNS)["vector"].per_query
    freshness = {"q1": "fresh", "q2": "older", "q4": "older"}

    assert slice_by(per_query, freshness.__getitem__) == close_each(
        {"fresh": PERFECT, "older": {"recall@10": 0.5, "ndcg@10": 0.5, "mrr@10": 0.5}}
    )
