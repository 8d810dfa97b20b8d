"""The latest recall guardrail as the ops page shows it (retrieval/ops_state.py, which
cannot import this package: it sits below it)."""

from evaluation.guardrail import MODES, K
from evaluation.models import EvaluationRun
from retrieval.ops_state import Guardrail, read_guardrail_with


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


def hand_in() -> None:
    read_guardrail_with(latest_guardrail)
