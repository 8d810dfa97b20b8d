"""An evaluation run: an evaluation set's judged queries through every search path,
scored, sliced and kept (`EvaluationRun`).

Slices:
- `query_class`: the class `retrieval.query.parse.query_class` gives each query's text (the
  metrics label), so a path's weakness on one shape of query is not averaged away;
- `freshness`: the same rankings scored against the *fresh* relevant documents only (the
  set's listings made in the last N minutes, or by default its newest tenth: those the
  simulated cache never saw) and against the rest; a query with no relevant document in a
  band is not scored in it;
- `variants`: `cache_fallback_without_merge`, the cached ranking alone.

A listing that several of the set's documents were merged into (by de-duplication)
stands for all of them, in document-id order.
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.utils import timezone

from evaluation.metrics import Figures, PathScores, Run, score_paths, slice_by
from evaluation.models import EvaluationRun, EvaluationSet
from evaluation.paths import (
    ALL_PATHS,
    CACHE_WITHOUT_MERGE,
    PATHS,
    SERVED,
    EvaluationSearch,
    run_paths,
)
from ingestion.models import Listing, SourceRecord
from retrieval.bounds.deadline import BudgetPolicy
from retrieval.query.parse import query_class

FRESH_FRACTION = 0.1


@dataclass(frozen=True)
class Report:
    evaluation_set: str
    k: int
    queries: int
    fresh_documents: int
    paths: dict[str, Figures]  # the five PATHS
    slices: dict[str, Any]
    failures: dict[str, int]  # path -> queries it could not answer in its own mode

    def as_json(self) -> dict[str, Any]:
        return {"paths": self.paths, "slices": self.slices}


def evaluate(
    evaluation_set: EvaluationSet,
    *,
    k: int = 10,
    query_ids: Sequence[str] | None = None,
    kind: str = EvaluationRun.Kind.EVALUATE,
    paths: Sequence[str] = ALL_PATHS,
    fresh_minutes: float | None = None,
) -> Report:
    """`assess`, and its figures kept as an `EvaluationRun` of `kind`."""
    report = assess(
        evaluation_set, k=k, query_ids=query_ids, paths=paths, fresh_minutes=fresh_minutes
    )
    EvaluationRun.objects.create(
        evaluation_set=evaluation_set,
        kind=kind,
        finished_at=timezone.now(),
        k=k,
        query_count=report.queries,
        figures=report.as_json(),
        failures=report.failures,
    )
    return report


def assess(
    evaluation_set: EvaluationSet,
    *,
    k: int = 10,
    query_ids: Sequence[str] | None = None,
    paths: Sequence[str] = ALL_PATHS,
    fresh_minutes: float | None = None,
) -> Report:
    """Run `paths` over the set's queries (those of `query_ids` when given) and score them
    against its judgments; `fresh_minutes` as `fresh_listings` takes it."""
    queries = dict(evaluation_set.queries.values_list("external_id", "text"))
    if query_ids is not None:
        queries = {qid: queries[qid] for qid in query_ids}
    documents_of = _documents_of(evaluation_set)
    fresh = fresh_listings(evaluation_set, fresh_minutes)
    search = EvaluationSearch(audience=evaluation_set.source.audience, k=k, fresh=fresh)
    runs = run_paths(search, queries, paths)
    scored_runs = {
        path: _as_documents(rankings, documents_of) for path, rankings in runs.rankings.items()
    }
    relevant = {
        qid: docs for qid, docs in evaluation_set.relevant_documents().items() if qid in queries
    }
    scores = score_paths(relevant, scored_runs, recall_k=k)
    fresh_documents = {doc for listing in fresh for doc in documents_of.get(listing, ())}
    return Report(
        evaluation_set=evaluation_set.name,
        k=k,
        queries=len(queries),
        fresh_documents=len(fresh_documents),
        paths={path: scores[path].means for path in PATHS if path in scores},
        slices={
            "query_class": _by_class(scores, queries),
            "freshness": {
                "fresh": _scored_or_empty(_within(relevant, fresh_documents), scored_runs, k),
                "rest": _scored_or_empty(_without(relevant, fresh_documents), scored_runs, k),
            },
            "variants": {
                path: scores[path].means for path in (CACHE_WITHOUT_MERGE,) if path in scores
            },
        },
        failures=runs.failures,
    )


def served_recall(
    evaluation_set: EvaluationSet, policy: BudgetPolicy, query_ids: Sequence[str], k: int = 10
) -> float:
    """Mean recall@k of the `served` path under `policy` over the set's `query_ids`: what
    readers searching by those budgets get, unanswered searches counting as nothing."""
    queries = dict(evaluation_set.queries.values_list("external_id", "text"))
    queries = {qid: queries[qid] for qid in query_ids}
    search = EvaluationSearch(
        audience=evaluation_set.source.audience, k=k, fresh=frozenset(), policy=policy
    )
    runs = run_paths(search, queries, (SERVED,))
    served = _as_documents(runs.rankings[SERVED], _documents_of(evaluation_set))
    relevant = {
        qid: docs for qid, docs in evaluation_set.relevant_documents().items() if qid in queries
    }
    return score_paths(relevant, {SERVED: served}, recall_k=k)[SERVED].means[f"recall@{k}"]


def fresh_listings(evaluation_set: EvaluationSet, minutes: float | None = None) -> frozenset[int]:
    """The set's active listings made in the last `minutes`, or (None) the newest tenth of
    them, by when they were first made: those the simulated cache never saw."""
    listings = Listing.objects.filter(
        records__source=evaluation_set.source, status=Listing.Status.ACTIVE
    ).distinct()
    if minutes is not None:
        since = timezone.now() - timedelta(minutes=minutes)
        return frozenset(listings.filter(created_at__gte=since).values_list("id", flat=True))
    newest = math.ceil(listings.count() * FRESH_FRACTION)
    ids = listings.order_by("-created_at", "-id").values_list("id", flat=True)[:newest]
    return frozenset(ids)


def _documents_of(evaluation_set: EvaluationSet) -> dict[int, list[str]]:
    documents: dict[int, list[str]] = {}
    records = SourceRecord.objects.filter(
        source=evaluation_set.source, listing__isnull=False
    ).values_list("listing_id", "external_id")
    for listing_id, external_id in records.order_by("external_id"):
        documents.setdefault(listing_id, []).append(external_id)
    return documents


def _as_documents(rankings: Mapping[str, list[int]], documents_of: Mapping[int, list[str]]) -> Run:
    return {
        query_id: [doc for listing in ranking for doc in documents_of.get(listing, ())]
        for query_id, ranking in rankings.items()
    }


def _within(relevant: Mapping[str, set[str]], band: set[str]) -> dict[str, set[str]]:
    return {qid: docs & band for qid, docs in relevant.items() if docs & band}


def _without(relevant: Mapping[str, set[str]], band: set[str]) -> dict[str, set[str]]:
    return {qid: docs - band for qid, docs in relevant.items() if docs - band}


def _scored_or_empty(
    relevant: Mapping[str, set[str]], runs: Mapping[str, Run], k: int
) -> dict[str, Any]:
    """Each path's figures in one band, and how many queries it scored ({} for none)."""
    if not relevant:
        return {}
    scores = score_paths(relevant, runs, recall_k=k)
    return {"queries": len(relevant)} | {path: scores[path].means for path in scores}


def _by_class(
    scores: Mapping[str, PathScores], queries: Mapping[str, str]
) -> dict[str, dict[str, Any]]:
    classes = {qid: query_class(text) for qid, text in queries.items()}
    by_class: dict[str, dict[str, Any]] = {}
    for path, path_scores in scores.items():
        for label, figures in slice_by(path_scores.per_query, classes.__getitem__).items():
            by_class.setdefault(label, {})[path] = figures
    for label, row in by_class.items():
        row["queries"] = sum(
            1 for qid in next(iter(scores.values())).per_query if classes[qid] == label
        )
    return by_class
