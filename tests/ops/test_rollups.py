"""The per-minute roll-ups (ops/rollups.py, ops/rollup_writer.py): what a
flush writes, in how many statements, under which minute, and what it deletes. The clock
is injected; the counters are the real ones, in series of their own (a query class no
search has), so other tests' counts never land in these."""

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pytest_django import DjangoAssertNumQueries

from ops import rollup_writer
from ops.models import MetricRollup
from ops.rollup_writer import RollupWriter
from retrieval import metrics

pytestmark = pytest.mark.django_db

NOON = datetime(2026, 12, 1, 12, 0, tzinfo=UTC).timestamp()
LABELS = {"mode": "hybrid", "degraded": "false", "query_class": "rollup-test", "generation": "7"}


class Clock:
    def __init__(self, at: float) -> None:
        self.at = at

    def __call__(self) -> float:
        return self.at


def answered(times: int) -> None:
    metrics.COMPLETED.labels(**LABELS).inc(times)


def written() -> list[tuple[str, float]]:
    rows = MetricRollup.objects.filter(
        metric="retrieval_completed_total", labels__query_class="rollup-test"
    ).order_by("minute")
    return [(f"{row.minute:%H:%M}", row.value) for row in rows]


def test_it_writes_each_minute_s_increase_not_the_running_total() -> None:
    clock = Clock(NOON + 5)
    writer = RollupWriter(clock)
    answered(2)
    clock.at = NOON + 60
    writer.flush()
    answered(3)
    clock.at = NOON + 120
    writer.flush()

    assert written() == [("12:00", 2.0), ("12:01", 3.0)]


def test_counts_from_before_the_writer_started_are_not_written() -> None:
    answered(4)  # as a forked pool process inherits its parent's counts
    writer = RollupWriter(Clock(NOON))
    answered(1)
    writer.flush()

    assert written() == [("12:00", 1.0)]


def test_a_flush_is_one_statement(django_assert_num_queries: DjangoAssertNumQueries) -> None:
    writer = RollupWriter(Clock(NOON))
    answered(1)
    # Grows 12 of its buckets (0.015 s and up), +Inf, its count and its sum.
    metrics.REQUEST_SECONDS.labels(mode="rollup-test").observe(0.012)
    metrics.BREAKER_STATE.set(1)
    try:
        with django_assert_num_queries(1):
            rows = writer.flush()
    finally:
        metrics.BREAKER_STATE.set(0)

    assert rows == 1 + 15 + 1
    histogram = MetricRollup.objects.filter(labels__mode="rollup-test")
    buckets = {row.labels["le"]: row.value for row in histogram if "le" in row.labels}
    assert "0.01" not in buckets  # not grown: not written
    assert buckets["0.015"] == buckets["+Inf"] == 1.0
    assert MetricRollup.objects.filter(metric="retrieval_vector_breaker_open").get().value == 1


def test_a_flush_deletes_the_minutes_past_the_retention() -> None:
    now = datetime.fromtimestamp(NOON, UTC)
    for age in (rollup_writer.RETENTION + timedelta(minutes=1), rollup_writer.RETENTION):
        MetricRollup.objects.create(
            minute=now - age, metric="retrieval_completed_total", labels=LABELS, value=1
        )
    writer = RollupWriter(Clock(NOON))
    answered(1)
    writer.flush()

    assert written() == [
        (f"{now - rollup_writer.RETENTION:%H:%M}", 1.0),
        ("12:00", 1.0),
    ]


def test_what_a_failed_flush_held_is_written_by_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock(NOON)
    writer = RollupWriter(clock)
    answered(2)

    def database_down(*args: object) -> None:
        raise OSError("no database")

    with monkeypatch.context() as patched:
        patched.setattr(rollup_writer, "_write", database_down)
        with pytest.raises(OSError, match="no database"):
            writer.flush()
    answered(1)
    clock.at = NOON + 60
    writer.flush()

    assert written() == [("12:00", 3.0)]


@pytest.mark.django_db(transaction=True)
def test_stopping_writes_the_current_minute() -> None:
    writer = RollupWriter(Clock(NOON))
    writer.start()
    answered(5)
    writer.stop()

    assert written() == [("12:00", 5.0)]


# Run in a process of its own, with PROMETHEUS_MULTIPROC_DIR set before prometheus_client
# is imported: counts `times` searches and prints what the roll-ups read of their series.
_COUNT_AND_READ = """
import json, sys
import django
django.setup()
from retrieval import metrics
from ops import rollups
metrics.COMPLETED.labels(**json.loads(sys.argv[1])).inc(int(sys.argv[2]))
print(rollups.read(rollups.COUNTED)[("retrieval_completed_total", sys.argv[1])])
"""


def test_in_multiprocess_mode_each_process_reads_only_its_own_counts(
    tmp_path: Path, child_env: dict[str, str]
) -> None:
    env = {**child_env, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    labels = json.dumps(LABELS, sort_keys=True)

    def count(times: int) -> float:
        argv = [sys.executable, "-c", _COUNT_AND_READ, labels, str(times)]
        return float(subprocess.run(argv, env=env, capture_output=True, check=True).stdout)

    assert count(5) == 5  # this process's file stays behind, as a killed one's does
    assert count(1) == 1  # not 6: the other's file is /metrics' to add up, not ours
