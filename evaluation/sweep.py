"""The vector-budget sweep's figures and its recommendation, from the answers the running
system gave (evaluation/sweep_run.py asks for them over HTTP). Nothing here does I/O, so
every figure can be checked on hand-made answers.

What the figures mean, and a change must keep:
- latency is the client's: from sending the request to reading the whole response, as a
  caller of the system waits for it; percentiles are nearest-rank (each is a latency
  some request really took);
- a request that got no search answer (a 503, another status, a transport error) counts
  in every share and scores 0 on recall, never left out: a budget is not excused from
  the queries it failed;
- the exhausted-budget ratio is over the requests whose vector stage was started (no
  `breaker_open`, `shed`, `no_budget`, nor a generation lookup that failed), since a
  stage that never started could not run out of time;
- recall@10 is scored on the judged documents each answer showed, per pass over the
  queries, and averaged over the passes; its loss is the unbounded run's recall minus
  the budget's (positive: worse).
"""

import ipaddress
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

import numpy as np

from evaluation.metrics import Judgments, recall_at, score_paths
from retrieval.types import Mode, Reason

RECALL_K: Final = 10
MAX_RECALL_LOSS: Final = 0.01
MAX_EXHAUSTED_RATIO: Final = 0.05
PERCENTILES: Final = {"p50": 50, "p95": 95, "p99": 99}
UNAVAILABLE: Final = "unavailable"  # a 503: no stage answered in time
FAILED: Final = "failed"  # any other status, or no response at all
# The vector stage was never started: it could not have run out of its budget.
_NOT_STARTED: Final = frozenset(
    {
        Reason.BREAKER_OPEN,
        Reason.SHED,
        Reason.NO_BUDGET,
        Reason.NO_GENERATION,
        Reason.DATABASE_ERROR,
    }
)
_EXHAUSTED: Final = frozenset({Reason.VECTOR_TIMEOUT, Reason.EMBED_TIMEOUT})

RULE: Final = (
    f"A budget passes when its recall@{RECALL_K} loss against the unbounded run is at most"
    f" {MAX_RECALL_LOSS} and at most {MAX_EXHAUSTED_RATIO:.0%} of its started vector stages"
    " ran out of budget. The stable region is the passing budgets from the largest swept one"
    " down to the first that fails. The recommendation is the region's second-smallest"
    " budget: the next smaller one passes too, so the vector stage can slow down by one"
    " sweep step before the recommended budget fails, and a budget that only just clears a"
    " sharp knee is never chosen. A region of one budget is recommended only with a warning"
    " (sweep larger budgets); no region, no recommendation."
)


class NotLoopbackError(ValueError):
    """The sweep's target is not this machine: it must never load anyone else's."""


def loopback_base_url(url: str) -> str:
    """`url` without a trailing slash, if it is http(s) to a loopback host (127.0.0.0/8,
    ::1, localhost); NotLoopbackError otherwise."""
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or parts.query or parts.fragment:
        raise NotLoopbackError(f"{url!r}: expected http(s)://host[:port][/path]")
    host = parts.hostname or ""
    if host != "localhost":
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            raise NotLoopbackError(f"{url!r}: only a loopback address or localhost") from None
        mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1 is loopback too
        if not (address.is_loopback or (mapped is not None and mapped.is_loopback)):
            raise NotLoopbackError(f"{url!r}: {host} is not a loopback address")
    return url.rstrip("/")


@dataclass(frozen=True)
class Answer:
    """One request of the sweep, as the client saw it."""

    query_id: str
    round: int  # which pass over the queries
    latency_ms: float
    status: int  # 0: no response (a transport error)
    mode: str | None = None  # of a 200
    reasons: tuple[str, ...] = ()  # of a 200 or a 503
    documents: tuple[str, ...] = ()  # the judged collection's ids of what was shown

    @property
    def outcome(self) -> str:
        """The mode a 200 answered in; `unavailable` for a 503, `failed` for the rest."""
        if self.status == 200 and self.mode is not None:
            return self.mode
        return UNAVAILABLE if self.status == 503 else FAILED


@dataclass(frozen=True)
class BudgetFigures:
    vector_budget_ms: float
    requests: int
    latency_ms: dict[str, float]  # PERCENTILES' names -> ms
    outcomes: dict[str, float]  # share of requests per mode, `unavailable`, `failed`
    fallback_share: float  # share of requests not answered in hybrid mode
    reasons: dict[str, float]  # share of requests giving each reason (an answer can give several)
    vector_started: int
    exhausted_ratio: float | None  # None: no vector stage was started at all
    unavailable: int
    recall: float
    recall_loss: float | None  # None for the unbounded run itself


def budget_figures(
    vector_budget_ms: float,
    answers: Sequence[Answer],
    judgments: Judgments,
    reference_recall: float | None,
) -> BudgetFigures:
    """The figures of one budget's answers; `reference_recall` is the unbounded run's
    (None when these answers are the unbounded run)."""
    if not answers:
        raise ValueError("no answers to figure")
    total = len(answers)
    outcomes = Counter(answer.outcome for answer in answers)
    reasons = Counter(reason for answer in answers for reason in set(answer.reasons))
    # A failed request tells nothing of its vector stage; a 503 does, by its reasons.
    told = [answer for answer in answers if answer.outcome != FAILED]
    started = [answer for answer in told if not _NOT_STARTED & set(answer.reasons)]
    exhausted = sum(1 for answer in started if _EXHAUSTED & set(answer.reasons))
    recall = _recall(answers, judgments)
    return BudgetFigures(
        vector_budget_ms=vector_budget_ms,
        requests=total,
        latency_ms=_percentiles([answer.latency_ms for answer in answers]),
        outcomes={outcome: count / total for outcome, count in sorted(outcomes.items())},
        fallback_share=1 - outcomes[Mode.HYBRID] / total,
        reasons={reason: count / total for reason, count in sorted(reasons.items())},
        vector_started=len(started),
        exhausted_ratio=exhausted / len(started) if started else None,
        unavailable=outcomes[UNAVAILABLE],
        recall=recall,
        recall_loss=None if reference_recall is None else reference_recall - recall,
    )


def _percentiles(latencies: Sequence[float]) -> dict[str, float]:
    values = np.percentile(latencies, list(PERCENTILES.values()), method="inverted_cdf")
    return {name: float(value) for name, value in zip(PERCENTILES, values, strict=True)}


def _recall(answers: Sequence[Answer], judgments: Judgments) -> float:
    """Mean recall@10 of the passes; an answer that showed nothing scores 0."""
    runs: dict[str, dict[str, list[str]]] = {}
    for answer in answers:
        runs.setdefault(f"round {answer.round}", {})[answer.query_id] = list(answer.documents)
    scores = score_paths(judgments, runs, recall_k=RECALL_K)
    name = recall_at(RECALL_K)
    return math.fsum(scores[run].means[name] for run in runs) / len(runs)


def latency_saved_ms(reference: BudgetFigures, figures: BudgetFigures) -> float:
    """p99 latency saved against the unbounded run: the tail is what a budget bounds."""
    return reference.latency_ms["p99"] - figures.latency_ms["p99"]


@dataclass(frozen=True)
class Verdict:
    vector_budget_ms: float
    passes: bool
    why: str


@dataclass(frozen=True)
class Recommendation:
    vector_budget_ms: float | None
    verdicts: list[Verdict]  # one per budget, smallest first
    warning: str | None = None


def recommend(budgets: Sequence[BudgetFigures]) -> Recommendation:
    """The budget RULE picks, with each budget's verdict and why."""
    ordered = sorted(budgets, key=lambda figures: figures.vector_budget_ms)
    failures = {figures.vector_budget_ms: _failures(figures) for figures in ordered}
    region: list[float] = []  # the stable region, largest first
    for figures in reversed(ordered):
        if failures[figures.vector_budget_ms]:
            break
        region.append(figures.vector_budget_ms)
    region.reverse()
    chosen, warning = None, None
    if len(region) == 1:
        chosen = region[0]
        warning = (
            f"only the largest budget ({_ms(chosen)}) passes: no margin below it;"
            " sweep larger budgets before relying on it"
        )
    elif region:
        chosen = region[1]
    verdicts = [_verdict(f.vector_budget_ms, failures, region, chosen) for f in ordered]
    return Recommendation(chosen, verdicts, warning)


def _verdict(
    budget: float, failures: Mapping[float, list[str]], region: list[float], chosen: float | None
) -> Verdict:
    if failures[budget]:
        return Verdict(budget, False, "fails: " + "; ".join(failures[budget]))
    if not region or budget < region[0]:
        failing = min(b for b, reasons in failures.items() if b > budget and reasons)
        return Verdict(budget, True, f"passes, but {_ms(failing)} fails: not a stable region")
    if budget == chosen and len(region) > 1:
        why = f"recommended: passes, as do the next smaller ({_ms(region[0])}) and every larger"
    elif budget == chosen:
        why = "recommended with a warning: passes, but no smaller budget does"
    elif chosen is not None and budget < chosen:
        why = (
            "passes, but it is the stable region's edge (no smaller budget passes, or none"
            " was swept): no margin below it"
        )
    else:
        why = "passes; more than needed"
    return Verdict(budget, True, why)


def _failures(figures: BudgetFigures) -> list[str]:
    failures = []
    if figures.recall_loss is not None and figures.recall_loss > MAX_RECALL_LOSS:
        failures.append(f"recall loss {figures.recall_loss:.3f} > {MAX_RECALL_LOSS}")
    if figures.exhausted_ratio is None:
        failures.append("no vector stage was started: nothing measured")
    elif figures.exhausted_ratio > MAX_EXHAUSTED_RATIO:
        failures.append(
            f"exhausted {figures.exhausted_ratio:.1%} of started > {MAX_EXHAUSTED_RATIO:.0%}"
        )
    return failures


def _ms(budget: float) -> str:
    return f"{budget:g} ms"
