"""The recall guardrail: a sample of judged queries through the live search paths, now and
then, so a regression in what a fallback costs shows up on a dashboard rather than at
the next manual evaluation.

Cheap by construction: at most `EVALUATION_GUARDRAIL_QUERIES` queries a run, three paths
(the modes a public answer can have: hybrid, lexical_fallback, cache_fallback), on the
warming queue (never ahead of ingestion), in-process against the live database, outside
the public retrieval metrics (`retrieval.metrics.uncounted`). Its figures are kept as an
`EvaluationRun` and exported at scrape time (`GuardrailCollector`), so every process's
/metrics tells the same latest result and a restart loses nothing.
"""

import random
from collections.abc import Iterator

from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from evaluation.models import EvaluationRun, EvaluationSet
from evaluation.paths import CACHE_FALLBACK, HYBRID, LEXICAL_FALLBACK
from evaluation.runs import Report, evaluate, served_recall
from retrieval.models import Canary
from retrieval.service import budget_policy

# Path names are the modes they answer in: the gauges' one label, a fixed set.
MODES = (HYBRID, LEXICAL_FALLBACK, CACHE_FALLBACK)
K = 10


def guarded_set() -> EvaluationSet | None:
    """The set named by EVALUATION_GUARDRAIL_SET, else the latest imported."""
    sets = EvaluationSet.objects.all()
    if settings.EVALUATION_GUARDRAIL_SET:
        return sets.filter(name=settings.EVALUATION_GUARDRAIL_SET).first()
    return sets.order_by("-imported_at").first()


def run(rng: random.Random | None = None) -> Report | None:
    """One guardrail run over a sample of the set's judged queries (None: no set)."""
    evaluation_set = guarded_set()
    if evaluation_set is None:
        return None
    judged = sorted(evaluation_set.relevant_documents())
    size = min(settings.EVALUATION_GUARDRAIL_QUERIES, len(judged))
    # A different sample each run, so over time every judged query is watched.
    sample = (rng or random.Random()).sample(judged, size)  # noqa: S311 (not a secret)
    return evaluate(
        evaluation_set, k=K, query_ids=sample, kind=EvaluationRun.Kind.GUARDRAIL, paths=MODES
    )


def run_arms(rng: random.Random | None = None) -> dict[str, object] | None:
    """With a budget canary running, the same sample of judged queries served under each
    arm's budgets, their recall@10 kept on the canary (None: no canary, or no set)."""
    canary = Canary.objects.filter(state=Canary.State.RUNNING).first()
    evaluation_set = guarded_set()
    if canary is None or evaluation_set is None:
        return None
    judged = sorted(evaluation_set.relevant_documents())
    size = min(settings.EVALUATION_GUARDRAIL_QUERIES, len(judged))
    sample = (rng or random.Random()).sample(judged, size)  # noqa: S311 (not a secret)
    recall: dict[str, object] = {
        arm: served_recall(evaluation_set, budget_policy(vector_ms, deadline_ms), sample, K)
        for arm, vector_ms, deadline_ms in (
            ("control", canary.control_vector_budget_ms, canary.control_deadline_ms),
            ("canary", canary.vector_budget_ms, canary.deadline_ms),
        )
    }
    figures = {**recall, "queries": size, "at": timezone.now().isoformat()}
    Canary.objects.filter(pk=canary.pk, state=Canary.State.RUNNING).update(guardrail=figures)
    return figures


class GuardrailCollector(Collector):
    """The latest guardrail run's recall@10 per mode, how many queries it scored and how
    old it is; nothing until one has run."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            last = (
                EvaluationRun.objects.filter(kind=EvaluationRun.Kind.GUARDRAIL)
                .order_by("-finished_at")
                .first()
            )
        except DatabaseError:  # Postgres away: the scrape's other figures still count
            return
        if last is None:
            return
        recall = GaugeMetricFamily(
            "evaluation_guardrail_recall_at_10",
            "Recall@10 of the latest recall-guardrail run, per search mode",
            labels=["mode"],
        )
        paths = last.figures["paths"]
        for mode in MODES:
            if mode in paths:
                recall.add_metric([mode], paths[mode][f"recall@{K}"])
        yield recall
        yield GaugeMetricFamily(
            "evaluation_guardrail_queries",
            "Judged queries the latest recall-guardrail run scored",
            value=last.query_count,
        )
        yield GaugeMetricFamily(
            "evaluation_guardrail_age_seconds",
            "Seconds since the latest recall-guardrail run finished",
            value=(timezone.now() - last.finished_at).total_seconds(),
        )
