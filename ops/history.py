"""The ops page's history: the roll-ups of every process (ops/rollups.py), summed
into the buckets of a window (a minute for the last hour, a quarter of an hour for the
last day), in one statement per window.

A histogram's percentile is taken as Prometheus' `histogram_quantile` takes it: from the
bucket counts summed over processes (and over the label not asked about), by linear
interpolation inside the bucket the rank falls in."""

import json
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import connection

_READ = """
SELECT date_bin(make_interval(secs => %(step_s)s), minute, %(since)s) AS bucket,
       metric, labels::text, sum(value), max(value)
FROM retrieval_metric_rollup
WHERE minute >= %(since)s AND minute < %(until)s
GROUP BY 1, 2, 3
"""

Labels = dict[str, str]


@dataclass(frozen=True)
class Window:
    name: str  # "last hour"
    step: timedelta
    buckets: int

    def starts(self, now: datetime) -> list[datetime]:
        """Each bucket's start, the last one holding `now`."""
        step_s = self.step.total_seconds()
        last = datetime.fromtimestamp(now.timestamp() // step_s * step_s, UTC)
        return [last - self.step * back for back in range(self.buckets - 1, -1, -1)]


LAST_HOUR = Window("last hour", timedelta(minutes=1), 60)
LAST_DAY = Window("last day", timedelta(minutes=15), 96)

Series = list[float]
Pick = Callable[[Labels], bool]


@dataclass(frozen=True)
class History:
    window: Window
    starts: list[datetime]
    # (metric, labels as JSON) -> per bucket: the sum of its rows, the largest row
    sums: dict[tuple[str, str], Series]
    maxima: dict[tuple[str, str], Series]

    def by(self, metric: str, label: str, pick: Pick = lambda _: True) -> dict[str, Series]:
        """`metric` per bucket, one series per value of `label`, summed over the rest."""
        split: dict[str, Series] = defaultdict(lambda: [0.0] * len(self.starts))
        for labels, values in self._of(metric, self.sums, pick):
            _add(split[labels.get(label, "")], values)
        return dict(sorted(split.items()))

    def total(self, metric: str, pick: Pick = lambda _: True) -> Series:
        summed = [0.0] * len(self.starts)
        for _, values in self._of(metric, self.sums, pick):
            _add(summed, values)
        return summed

    def highest(self, metric: str) -> Series:
        """A gauge's largest value in each bucket (0 where no process wrote it)."""
        top = [0.0] * len(self.starts)
        for _, values in self._of(metric, self.maxima, lambda _: True):
            top = [max(a, b) for a, b in zip(top, values, strict=True)]
        return top

    def quantile(self, q: float, histogram: str, pick: Pick = lambda _: True) -> list[float | None]:
        """The q-quantile of `histogram` in each bucket (None where it observed nothing)."""
        by_le = self.by(f"{histogram}_bucket", "le", pick)
        bounds = sorted((float(le), counts) for le, counts in by_le.items())
        return [
            interpolated(q, [(le, counts[i]) for le, counts in bounds])
            for i in range(len(self.starts))
        ]

    def _of(
        self, metric: str, table: dict[tuple[str, str], Series], pick: Pick
    ) -> list[tuple[Labels, Series]]:
        found = [
            (json.loads(labels), values) for (m, labels), values in table.items() if m == metric
        ]
        return [(labels, values) for labels, values in found if pick(labels)]


def interpolated(q: float, cumulative: list[tuple[float, float]]) -> float | None:
    """histogram_quantile over (upper bound, observations at or below it), +Inf last; a
    rank in the +Inf bucket is given the highest finite bound."""
    if not cumulative or cumulative[-1][1] <= 0:
        return None
    rank = q * cumulative[-1][1]
    lower, below = 0.0, 0.0
    for upper, count in cumulative:
        if count >= rank:
            if math.isinf(upper):
                return lower
            inside = count - below
            return lower + (upper - lower) * ((rank - below) / inside if inside else 1.0)
        lower, below = upper, count
    return lower


def read(window: Window, now: datetime) -> History:
    starts = window.starts(now)
    index = {start: i for i, start in enumerate(starts)}
    sums: dict[tuple[str, str], Series] = defaultdict(lambda: [0.0] * len(starts))
    maxima: dict[tuple[str, str], Series] = defaultdict(lambda: [0.0] * len(starts))
    with connection.cursor() as cursor:
        cursor.execute(
            _READ,
            {
                "step_s": window.step.total_seconds(),
                "since": starts[0],
                "until": starts[-1] + window.step,
            },
        )
        for bucket, metric, labels, summed, largest in cursor.fetchall():
            i = index[bucket.astimezone(UTC)]
            sums[metric, labels][i] = summed
            maxima[metric, labels][i] = largest
    return History(window, starts, dict(sums), dict(maxima))


def _add(into: Series, values: Series) -> None:
    for i, value in enumerate(values):
        into[i] += value
