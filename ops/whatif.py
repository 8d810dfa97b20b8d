"""What a candidate vector budget would have done to the searches on record.

The vector stage's time is recorded per search with the budget in force: a stage that
finished is counted at its duration; a stage cut at the budget is counted only as "more
than the budget" (censored), since nothing says how long it would have taken. So:

- a tighter candidate c (c <= the budget B) is exact: the searches it would have degraded
  are those whose stage took more than c, cut ones included;
- a looser one (c > B) needs what the cut stages would have taken. A small sample of
  searches watches the stage on past B, up to a longer limit, while their answer is still
  cut at B; among the sampled stages that took more than B, the share that also took more
  than c estimates the same share among all the cut ones:
      P(stage > c) = P(stage > B) * P(stage > c | stage > B).
  Past the sample's own limit it knows nothing either, and says so.

Both records are cumulative histograms (Prometheus buckets: counts at most each bound),
so every candidate must be a bucket bound; retrieval/metrics.py makes the candidates and
the budget bounds.
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass

from ops.history import History, Pick
from retrieval.metrics import WHATIF_BOUNDS
from retrieval.query.parse import QUERY_CLASSES


@dataclass(frozen=True)
class Cumulative:
    """Counts at most each bound (seconds); `total` counts them all, +Inf included."""

    at_most: Mapping[float, float]
    total: float

    def more_than(self, bound: float) -> float:
        if bound not in self.at_most:
            raise ValueError(f"{bound} s is not a bound of the record")
        return self.total - self.at_most[bound]

    def quantile(self, share: float, cap: float) -> float:
        """The stage time at `share` if stages were cut at `cap`: the first bound whose
        cumulative count reaches the share (bounds are the record's resolution), at most
        `cap`."""
        wanted = share * self.total
        for bound in sorted(self.at_most):
            if bound >= cap:
                break
            if self.at_most[bound] >= wanted:
                return bound
        return cap


@dataclass(frozen=True)
class Prediction:
    candidate_s: float
    degraded: float | None  # the share of searches degraded; None: nothing to go on
    p50_s: float
    p99_s: float  # of the vector stage, cut at the candidate
    measured: bool  # from the record alone (a tighter candidate), not the sample's

    @property
    def degraded_text(self) -> str:
        """As the ops page shows it: an estimate from the sample marked with ~."""
        if self.degraded is None:
            return "n/a"
        return f"{'' if self.measured else '~'}{self.degraded:.1%}"

    @property
    def p99_text(self) -> str:
        """Past the budget in force with nothing to go on: at least the budget."""
        if math.isnan(self.p99_s):
            return "n/a"
        at_least = "≥ " if self.degraded is None else ""
        return f"{at_least}{self.p99_s * 1000:.0f} ms"


def predict(
    record: Cumulative, budget_s: float, candidate_s: float, sampled: Cumulative | None = None
) -> Prediction:
    """What `candidate_s` would have given the searches of `record`, whose stages were cut
    at `budget_s`; `sampled` holds the stages watched past it."""
    if record.total == 0:
        return Prediction(candidate_s, None, math.nan, math.nan, True)
    if candidate_s <= budget_s:
        return Prediction(
            candidate_s,
            record.more_than(candidate_s) / record.total,
            record.quantile(0.5, candidate_s),
            record.quantile(0.99, candidate_s),
            measured=True,
        )
    cut = record.more_than(budget_s) / record.total
    p50, p99 = record.quantile(0.5, budget_s), record.quantile(0.99, budget_s)
    if cut == 0:  # nothing was cut: a looser budget changes nothing
        return Prediction(candidate_s, 0.0, p50, p99, measured=True)
    past = sampled.more_than(budget_s) if sampled is not None else 0
    if sampled is None or past == 0:
        return Prediction(candidate_s, None, p50, max(p99, budget_s), measured=False)
    beyond = sampled.more_than(candidate_s) / past
    # The stages past the budget, their times as the sample saw them: the record's
    # quantiles beyond its share within the budget come from the sample's conditional ones.
    return Prediction(
        candidate_s,
        cut * beyond,
        p50 if cut < 0.5 else _beyond(sampled, budget_s, candidate_s, (0.5 - (1 - cut)) / cut),
        p99 if cut < 0.01 else _beyond(sampled, budget_s, candidate_s, (0.99 - (1 - cut)) / cut),
        measured=False,
    )


def _beyond(sampled: Cumulative, budget_s: float, cap: float, share: float) -> float:
    """The time at `share` of the sampled stages that took more than `budget_s`."""
    past = sampled.more_than(budget_s)
    within = sampled.at_most[budget_s]
    for bound in sorted(b for b in sampled.at_most if b > budget_s):
        if bound >= cap:
            break
        if sampled.at_most[bound] - within >= share * past:
            return bound
    return cap


@dataclass(frozen=True)
class ClassWhatIf:
    query_class: str
    searches: float  # on record in the window
    predictions: list[Prediction]  # one per candidate, in the page's order


@dataclass(frozen=True)
class WhatIf:
    window: str
    budget_ms: float
    generation: int
    candidates_ms: list[float]
    classes: list[ClassWhatIf]
    sampled: float  # searches whose stage was watched past its budget
    sample_cost_s: float  # what watching them cost, in stage time past the budget

    @property
    def rows(self) -> list[tuple[float, list[Prediction]]]:
        """Each candidate (ms) with its prediction for each class, as the page lays them."""
        return [
            (candidate, [c.predictions[i] for c in self.classes])
            for i, candidate in enumerate(self.candidates_ms)
        ]


def of_history(history: History, generation: int, budget_s: float, limit_s: float) -> WhatIf:
    """The what-if of each bound up to `limit_s` (the stages' time) for the searches of
    `generation` in `history`'s window, per query class that has any."""
    candidates = [bound for bound in WHATIF_BOUNDS if bound <= limit_s]
    classes, sampled = [], 0.0
    for query_class in QUERY_CLASSES:
        pick = of_class(query_class, generation)
        record = cumulative(history, "retrieval_vector_stage_seconds", pick)
        watched = cumulative(history, "retrieval_vector_stage_sampled_seconds", pick)
        sampled += watched.total
        if record.total == 0:
            continue  # a class no search of the window was of: nothing to say
        classes.append(
            ClassWhatIf(
                query_class,
                record.total,
                [predict(record, budget_s, candidate, watched) for candidate in candidates],
            )
        )
    return WhatIf(
        window=history.window.name,
        budget_ms=budget_s * 1000,
        generation=generation,
        candidates_ms=[candidate * 1000 for candidate in candidates],
        classes=classes,
        sampled=sampled,
        sample_cost_s=sum(history.total("retrieval_vector_sample_seconds_total")),
    )


def of_class(query_class: str, generation: int) -> Pick:
    return lambda labels: (
        (labels.get("query_class"), labels.get("generation"))
        == (
            query_class,
            str(generation),
        )
    )


def cumulative(history: History, histogram: str, pick: Pick) -> Cumulative:
    by_le = {
        le: sum(counts) for le, counts in history.by(f"{histogram}_bucket", "le", pick).items()
    }
    # A bound no process's count grew at in the window has no rows: none at most it.
    return Cumulative(
        {bound: by_le.get(str(bound), 0.0) for bound in WHATIF_BOUNDS},
        total=by_le.get("+Inf", 0.0),
    )
