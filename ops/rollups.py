"""What a process records each minute for the ops page: the increase, since its last
flush, of each series of its own counters and histograms, and its breaker gauge.

Deltas, not cumulative values with a process id. Summing deltas is the whole read (any
window, any number of processes, no per-process `lag()` and no reset detection when a
process restarts at zero), deleting old minutes never leaves a series without the row its
first delta would be taken from, and an idle process writes nothing. What a delta loses,
that a later cumulative value would have recovered, is a flush that never happens: a
killed process's current minute, which the issue accepts.

Invariants:
- Only this process's own values: each metric object's `collect()`, never the registry's
  multiprocess collector, which sums every process's files under PROMETHEUS_MULTIPROC_DIR
  (each process would then write every other's counts again).
- Label values come from the metrics' own fixed sets (retrieval/metrics.py): no query text
  can reach a row.
"""

import json
from collections.abc import Iterable
from dataclasses import dataclass

from prometheus_client.metrics import MetricWrapperBase

from ingestion import metrics as ingestion_metrics
from retrieval import metrics

# What the ops page charts. Cumulative: a row is the increase since the last flush.
COUNTED: tuple[MetricWrapperBase, ...] = (
    metrics.COMPLETED,
    metrics.UNAVAILABLE,
    metrics.SHED_AT_DOOR,
    metrics.REASONS,
    metrics.PARENT_CANCELLED,
    metrics.VECTOR_ELIGIBLE,
    metrics.VECTOR_EXHAUSTED,
    metrics.REQUEST_SECONDS,
    metrics.VECTOR_STAGE,
    metrics.VECTOR_STAGE_SAMPLED,
    metrics.VECTOR_SAMPLE_SECONDS,
    metrics.ARM_ANSWERS,
    metrics.ARM_UNAVAILABLE,
    metrics.ARM_SECONDS,
    metrics.ARM_VECTOR,
    metrics.WARMING,
    ingestion_metrics.LEXICAL_LAG,
    ingestion_metrics.VECTOR_LAG,
)
# Levels: a row is the value at the flush, written only when not zero (the breaker is
# closed unless some process saw it otherwise).
GAUGED: tuple[MetricWrapperBase, ...] = (metrics.BREAKER_STATE,)

Series = tuple[str, str]  # (sample name, its labels as sorted JSON)


@dataclass(frozen=True)
class Row:
    metric: str
    labels: str  # JSON
    value: float


def read(families: Iterable[MetricWrapperBase]) -> dict[Series, float]:
    """Every sample of `families` as this process holds it; `_created` timestamps (not
    counts) left out."""
    return {
        (sample.name, json.dumps(sample.labels, sort_keys=True)): sample.value
        for metric in families
        for family in metric.collect()
        for sample in family.samples
        if not sample.name.endswith("_created")
    }


def increases(before: dict[Series, float], after: dict[Series, float]) -> list[Row]:
    """The series that grew from `before` to `after`, by how much."""
    return [
        Row(name, labels, value - before.get((name, labels), 0.0))
        for (name, labels), value in after.items()
        if value > before.get((name, labels), 0.0)
    ]


def levels(now: dict[Series, float]) -> list[Row]:
    return [Row(name, labels, value) for (name, labels), value in now.items() if value]
