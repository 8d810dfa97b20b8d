"""The latest recall guardrail (evaluation/guardrail.py) as the ops page shows it."""

from dataclasses import dataclass
from datetime import datetime

from evaluation.guardrail import MODES, K
from evaluation.models import EvaluationRun


@dataclass(frozen=True)
class Guardrail:
    finished_at: datetime
    queries: int
    recall_by_mode: dict[str, float]


def latest_guardrail() -> Guardrail | None:
    last = (
        EvaluationRun.objects.filter(kind=EvaluationRun.Kind.GUARDRAIL)
        .order_by("-finished_at")
        .first()
    )
    if last is None:
        return None
    paths = last.figures["paths"]
    recall = {mode: paths[mode][f"recall@{K}"] for mode in MODES if mode in paths}
    return Guardrail(last.finished_at, last.query_count, recall)
