"""Recall@k, nDCG@10 and MRR@10 of each search path's rankings against binary judgments.

The IR library (ir-measures: trec_eval through pytrec_eval-terrier for recall and nDCG,
its MS MARCO code for RR@10) is imported here and nowhere else, so swapping it is a change
to this one file. What the figures mean is ours, and a change must keep it:

- A run is a ranking, scored in the order given. trec_eval orders a run by score and
  breaks ties by document id, so each document gets a score that falls with its rank and
  never a tie. A document listed twice counts once, at its first (best) place.
- A judged query that a path returned nothing for, or left out, scores 0 on every figure:
  a path is not excused from a query it failed.
- A query with no relevant document is not scored: no ranking is right or wrong on it, so
  it is left out of `per_query` and of every mean rather than dragging every path down
  alike (CACM judges 52 of its 64 queries). Queries that only a run holds are ignored.
- Relevance is binary, so nDCG's gain is 1 for a relevant document and 0 otherwise, with
  the ideal ranking taken from all of a query's relevant documents.
"""

import math
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

import ir_measures
from ir_measures import RR, R, nDCG

# Query id -> the ids of the documents judged relevant to it.
Judgments = Mapping[str, Collection[str]]
# Query id -> document ids, best first.
Run = Mapping[str, Sequence[str]]
# Figure name ("recall@10", "ndcg@10", "mrr@10") -> value.
Figures = dict[str, float]

NDCG_AT_10 = "ndcg@10"
MRR_AT_10 = "mrr@10"


def recall_at(k: int) -> str:
    """The name of the recall figure for cutoff `k`."""
    return f"recall@{k}"


@dataclass(frozen=True)
class PathScores:
    """One path's figures: the mean over scored queries, and each scored query's own."""

    means: Figures
    per_query: dict[str, Figures]


def score_paths(
    judgments: Judgments, runs: Mapping[str, Run], *, recall_k: int = 10
) -> dict[str, PathScores]:
    """Each path's recall@`recall_k`, nDCG@10 and MRR@10 (path name -> its scores).

    Raises ValueError when no query has a relevant document: there is nothing to score.
    """
    # Checked here because trec_eval aborts the whole process on a cutoff of 0.
    if recall_k < 1:
        raise ValueError(f"recall cutoff must be at least 1, not {recall_k}")
    measures = {recall_at(recall_k): R @ recall_k, NDCG_AT_10: nDCG @ 10, MRR_AT_10: RR @ 10}
    name_of = {measure: name for name, measure in measures.items()}
    qrels = {
        query_id: dict.fromkeys(relevant, 1) for query_id, relevant in judgments.items() if relevant
    }
    if not qrels:
        raise ValueError("no judged query has a relevant document: nothing to score")
    evaluator = ir_measures.evaluator(list(measures.values()), qrels)

    scores: dict[str, PathScores] = {}
    for path, run in runs.items():
        # Zeros first, so a query the path did not answer scores 0 whatever the library
        # does with it (ranx, for one, refuses it), and every row has its figures in one
        # order, for a report to print as columns.
        per_query = {query_id: dict.fromkeys(measures, 0.0) for query_id in qrels}
        for metric in evaluator.iter_calc(_scored_run(run)):
            per_query[metric.query_id][name_of[metric.measure]] = float(metric.value)
        scores[path] = PathScores(means=_mean(list(per_query.values())), per_query=per_query)
    return scores


def slice_by(per_query: Mapping[str, Figures], key: Callable[[str], str]) -> dict[str, Figures]:
    """The mean figures of each slice (a query class, a freshness band), `key` giving each
    query id its slice's label. A slice is the mean of its own queries, each weighing the
    same, so slices of different sizes do not pull on each other."""
    members: defaultdict[str, list[Figures]] = defaultdict(list)
    for query_id, figures in per_query.items():
        members[key(query_id)].append(figures)
    return {label: _mean(figures) for label, figures in members.items()}


def _scored_run(run: Run) -> dict[str, dict[str, float]]:
    """The run as the library wants it: a score per document, falling with its rank.
    `dict.fromkeys` keeps a repeated document at its first place."""
    return {
        query_id: {document: float(-rank) for rank, document in enumerate(dict.fromkeys(ranking))}
        for query_id, ranking in run.items()
        if ranking
    }


def _mean(rows: Sequence[Figures]) -> Figures:
    return {name: math.fsum(row[name] for row in rows) / len(rows) for name in rows[0]}
