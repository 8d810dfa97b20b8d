"""Budget canaries, as the ops page runs them: start one (candidate budgets for a share of
readers, retrieval/bounds/arms.py), compare its arms on what their searches gave, promote
or roll it back, and roll it back by itself when its figures pass their objectives for a
sustained window (ops/tasks.py asks every minute).

The figures are the per-minute roll-ups of the arm metrics (retrieval/metrics.py,
`retrieval_arm_*`) since the canary started, every process's: a process's current minute
counts from its next flush. Intervals are 95 %: Wilson's for shares, and for a percentile
the ranks a binomial puts around it, read through the histogram's buckets as the
percentile itself is (ops/history.py)."""

import json
import math
from collections import defaultdict
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, connection, transaction

from ops import review
from ops.history import interpolated
from retrieval.metrics import LATENCY_BUCKETS, WHATIF_BOUNDS
from retrieval.models import BudgetConditions, Canary
from retrieval.types import Mode

Z = 1.96  # 95 %
ARMS = ("control", "canary")

_SINCE = """
SELECT date_trunc('minute', minute), metric, labels::text, sum(value)
FROM retrieval_metric_rollup
WHERE minute >= %(since)s AND minute < %(until)s AND metric LIKE 'retrieval_arm_%%'
GROUP BY 1, 2, 3
"""


@dataclass(frozen=True)
class Interval:
    value: float | None
    low: float | None
    high: float | None
    share: bool = False  # shown as a percentage; else as milliseconds

    def __str__(self) -> str:
        if self.value is None or self.low is None or self.high is None:
            return "n/a"
        return f"{self.brief} ({self._shown(self.low)} to {self._shown(self.high)})"

    @property
    def brief(self) -> str:
        """The value without its interval."""
        return "n/a" if self.value is None else self._shown(self.value)

    def _shown(self, number: float) -> str:
        return f"{number:.1%}" if self.share else f"{number:.1f}"


@dataclass(frozen=True)
class ArmFigures:
    answers: int  # answered, and given a 503
    fallback_share: Interval  # of them, not answered hybrid
    exhausted_ratio: Interval  # vector stages cut at their budget, of those started
    p50_ms: Interval
    p99_ms: Interval
    guardrail_recall: float | None  # the latest guardrail run under its budgets

    @classmethod
    def kept(cls, figures: dict[str, Any]) -> "ArmFigures":
        """An arm's figures as `end` kept them (`asdict`) in the canary's record."""
        return cls(
            answers=figures["answers"],
            fallback_share=Interval(**figures["fallback_share"]),
            exhausted_ratio=Interval(**figures["exhausted_ratio"]),
            p50_ms=Interval(**figures["p50_ms"]),
            p99_ms=Interval(**figures["p99_ms"]),
            guardrail_recall=figures["guardrail_recall"],
        )


@dataclass(frozen=True)
class InForce:
    vector_budget_ms: float
    deadline_ms: float
    promoted: Canary | None  # whose budgets they are; None: the settings'


def in_force() -> InForce:
    """The budgets every search runs by but a canary's: the last promoted canary's, else
    the settings' (retrieval/pg/budgets.py reads the same for the search path)."""
    promoted = Canary.objects.filter(state=Canary.State.PROMOTED).order_by("-ended_at").first()
    if promoted is None:
        return InForce(settings.SEARCH_VECTOR_BUDGET_MS, settings.SEARCH_DEADLINE_MS, None)
    return InForce(promoted.vector_budget_ms, promoted.deadline_ms, promoted)


def ended(count: int) -> list[tuple[Canary, dict[str, ArmFigures]]]:
    """The last `count` canaries to end, each with its arms' figures at the decision."""
    last = Canary.objects.exclude(state=Canary.State.RUNNING).order_by("-ended_at")[:count]
    return [(c, {arm: ArmFigures.kept(kept) for arm, kept in c.figures.items()}) for c in last]


def running() -> Canary | None:
    return Canary.objects.filter(state=Canary.State.RUNNING).first()


def start(by: User | None, vector_budget_ms: float, deadline_ms: float, share: float) -> Canary:
    """A canary of these budgets for `share` of readers; ValueError when they are not
    budgets a search can run by, or another canary runs."""
    if not 0 < share <= 0.5:
        raise ValueError("the canary's share of readers must be more than 0 and at most 0.5")
    reserve, least = settings.SEARCH_RESERVE_MS, settings.SEARCH_MIN_VECTOR_BUDGET_MS
    bounds = [bound * 1000 for bound in WHATIF_BOUNDS]
    if not any(abs(bound - vector_budget_ms) < 1e-9 for bound in bounds):
        # Promoted, it is the budget the what-if's record is cut at: one of its bounds.
        raise ValueError(
            "the vector budget must be one of the what-if's: "
            + ", ".join(f"{bound:g}" for bound in bounds)
            + " ms"
        )
    if not least <= vector_budget_ms < deadline_ms - reserve:
        raise ValueError(
            f"the vector budget must be at least {least:g} ms and leave the reserve"
            f" ({reserve:g} ms) within the deadline"
        )
    control = in_force()
    try:
        with transaction.atomic():
            return Canary.objects.create(
                vector_budget_ms=vector_budget_ms,
                deadline_ms=deadline_ms,
                share=share,
                control_vector_budget_ms=control.vector_budget_ms,
                control_deadline_ms=control.deadline_ms,
                started_by=by,
            )
    except IntegrityError:
        raise ValueError("a canary is running already: promote or roll it back first") from None


def end(canary: Canary, state: str, by: User | None, because: str, now: datetime) -> Canary:
    """Promote (its budgets are in force from now) or roll back (the control's stay), with
    each arm's figures kept as the decision's record. Only a running canary ends."""
    figures = {arm: asdict(f) for arm, f in compare(canary, now).items()}
    ended = Canary.objects.filter(pk=canary.pk, state=Canary.State.RUNNING).update(
        state=state, ended_at=now, ended_by=by, ended_because=because, figures=figures
    )
    if not ended:
        raise ValueError(f"canary {canary.pk} is not running")
    if state == Canary.State.PROMOTED:  # new budgets, chosen under today's conditions
        review.record(BudgetConditions.Why.PROMOTED, by)
    canary.refresh_from_db()
    return canary


# A row's labels, as a key: parsed once per row, not once per figure read from it.
Labels = frozenset[tuple[str, str]]


def compare(canary: Canary, now: datetime) -> dict[str, ArmFigures]:
    """Each arm's figures since the canary started."""
    summed: dict[tuple[str, Labels], float] = defaultdict(float)
    for _, metric, labels, value in _rows(canary.started_at, now):
        summed[metric, labels] += value
    return {arm: _figures(summed, arm, canary.guardrail.get(arm)) for arm in ARMS}


def _rows(since: datetime, until: datetime) -> list[tuple[datetime, str, Labels, float]]:
    with connection.cursor() as cursor:
        cursor.execute(_SINCE, {"since": since.replace(second=0, microsecond=0), "until": until})
        return [
            (at, metric, frozenset(json.loads(labels).items()), float(value))
            for at, metric, labels, value in cursor
        ]


def _figures(
    summed: dict[tuple[str, Labels], float], arm: str, guardrail_recall: float | None
) -> ArmFigures:
    def total(metric: str, **labels: str) -> float:
        wanted = {("arm", arm), *labels.items()}
        return sum(value for (m, key), value in summed.items() if m == metric and wanted <= key)

    answered = total("retrieval_arm_answers_total")
    hybrid = total("retrieval_arm_answers_total", mode=Mode.HYBRID)
    unavailable = total("retrieval_arm_unavailable_total")
    answers = answered + unavailable
    buckets = sorted(
        (float(dict(key)["le"]), value)
        for (m, key), value in summed.items()
        if m == "retrieval_arm_request_seconds_bucket" and ("arm", arm) in key
    )
    cumulative = _merged(buckets)
    return ArmFigures(
        answers=int(answers),
        fallback_share=wilson(answers - hybrid, answers),
        exhausted_ratio=wilson(
            total("retrieval_arm_vector_stages_total", outcome="exhausted"),
            total("retrieval_arm_vector_stages_total", outcome="eligible"),
        ),
        p50_ms=_percentile(0.5, cumulative),
        p99_ms=_percentile(0.99, cumulative),
        guardrail_recall=guardrail_recall,
    )


def _merged(buckets: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Bucket counts of the same bound added up (several rows: processes, minutes)."""
    merged: dict[float, float] = defaultdict(float)
    for bound, count in buckets:
        merged[bound] += count
    return sorted(merged.items())


def wilson(part: float, whole: float) -> Interval:
    """`part / whole` with Wilson's 95 % interval; None for no observations."""
    if whole <= 0:
        return Interval(None, None, None, share=True)
    p = part / whole
    centre = (p + Z * Z / (2 * whole)) / (1 + Z * Z / whole)
    half = Z * math.sqrt(p * (1 - p) / whole + Z * Z / (4 * whole * whole)) / (1 + Z * Z / whole)
    return Interval(p, max(0.0, centre - half), min(1.0, centre + half), share=True)


def _percentile(q: float, cumulative: list[tuple[float, float]]) -> Interval:
    """The q-quantile in ms, between the quantiles at the ranks a binomial of the count
    puts 1.96 standard deviations either side of it."""
    if not cumulative or cumulative[-1][1] <= 0:
        return Interval(None, None, None)
    n = cumulative[-1][1]
    spread = Z * math.sqrt(n * q * (1 - q)) / n
    value, low, high = (
        interpolated(min(1.0, max(0.0, share)), cumulative) for share in (q, q - spread, q + spread)
    )
    value_ms, low_ms, high_ms = (v * 1000 if v is not None else None for v in (value, low, high))
    return Interval(value_ms, low_ms, high_ms)


@dataclass(frozen=True)
class Minute:
    """The canary arm's searches in one completed minute."""

    answers: float
    fallbacks: float  # answered other than hybrid, or a 503
    over_objective: float  # took longer than the latency objective


def verdict(minutes: list[Minute], fallback_objective: float, least_answers: float) -> str | None:
    """Why the canary must be rolled back, or None: in every minute of the window that
    had searches its fallback share, or the share of its searches slower than the latency
    objective (its p99 over the objective: more than 1 % of them), was over, and the
    window held at least `least_answers` searches (fewer say nothing either way)."""
    seen = [m for m in minutes if m.answers > 0]
    if not seen or sum(m.answers for m in seen) < least_answers:
        return None
    if all(m.fallbacks / m.answers > fallback_objective for m in seen):
        return Canary.Why.FALLBACK_SHARE
    if all(m.over_objective / m.answers > 0.01 for m in seen):
        return Canary.Why.P99
    return None


def watch(now: datetime) -> Canary | None:
    """Roll the running canary back when `verdict` says so over the last completed minutes
    (CANARY_WINDOW_MINUTES), once it has run that long; the canary it rolled back, else
    None."""
    canary = running()
    if canary is None:
        return None
    this_minute = now.replace(second=0, microsecond=0)
    since = this_minute - timedelta(minutes=settings.CANARY_WINDOW_MINUTES)
    if since < canary.started_at.replace(second=0, microsecond=0):
        return None  # not yet a whole window of it: nothing sustained to judge
    why = verdict(
        _minutes(since, this_minute, canary.control_deadline_ms / 1000),
        settings.SEARCH_FALLBACK_OBJECTIVE,
        settings.CANARY_LEAST_ANSWERS,
    )
    if why is None:
        return None
    return end(canary, Canary.State.ROLLED_BACK, None, why, now)


def _minutes(since: datetime, until: datetime, objective_s: float) -> list[Minute]:
    # Slower than the objective: above the highest bucket bound within it.
    bound = max(b for b in LATENCY_BUCKETS if b <= objective_s)
    by_minute: dict[datetime, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for at, metric, key, value in _rows(since, until):
        labels = dict(key)
        if labels.get("arm") != "canary":
            continue
        counts = by_minute[at]
        if metric == "retrieval_arm_answers_total":
            counts["answers"] += value
            counts["fallbacks"] += 0 if labels.get("mode") == Mode.HYBRID else value
        elif metric == "retrieval_arm_unavailable_total":
            counts["answers"] += value
            counts["fallbacks"] += value
        elif metric == "retrieval_arm_request_seconds_bucket" and labels["le"] == "+Inf":
            counts["timed"] += value
        elif metric == "retrieval_arm_request_seconds_bucket" and float(labels["le"]) == bound:
            counts["within"] += value
    return [
        Minute(c["answers"], c["fallbacks"], c["timed"] - c["within"])
        for _, c in sorted(by_minute.items())
    ]
