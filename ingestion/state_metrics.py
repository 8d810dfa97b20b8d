"""Gauges read from the database when Prometheus scrapes: they describe state (how big the
quarantine is, which breakers are open, how stale each kind of source is), which is
shared by all processes and so belongs to no single process's counters."""

from collections.abc import Iterator
from typing import get_args

from django.db import DatabaseError, connection
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ingestion.embedding_lag import embedding_lag
from ingestion.models import Source
from resilience.breaker import State

KINDS = Source.Kind.values
BREAKER_STATES = get_args(State)

_SQL = """
    SELECT s.kind, s.breaker_state, count(*),
           max(extract(epoch FROM now() - s.last_success_at)),
           sum((SELECT count(*) FROM ingestion_quarantineditem q
                WHERE q.source_id = s.id AND q.resolved_at IS NULL))
    FROM ingestion_source s
    WHERE s.active
    GROUP BY s.kind, s.breaker_state
"""


class IngestionStateCollector(Collector):
    def collect(self) -> Iterator[GaugeMetricFamily]:
        breakers = GaugeMetricFamily(
            "ingestion_sources_by_breaker_state",
            "Active sources by circuit-breaker state",
            labels=["kind", "state"],
        )
        stale = GaugeMetricFamily(
            "ingestion_seconds_since_last_successful_poll",
            "The stalest active source of each kind: seconds since its last successful poll",
            labels=["kind"],
        )
        quarantine = GaugeMetricFamily(
            "ingestion_quarantine_open_items",
            "Quarantined items not yet resolved",
            labels=["kind"],
        )
        try:
            with connection.cursor() as cursor:
                cursor.execute(_SQL)
                rows = cursor.fetchall()
        except DatabaseError:  # the scrape's other figures still count
            return
        by_state = {(kind, state): count for kind, state, count, _, _ in rows}
        for kind in KINDS:
            for state in BREAKER_STATES:
                breakers.add_metric([kind, state], by_state.get((kind, state), 0))
            ages = [float(age) for k, _, _, age, _ in rows if k == kind and age is not None]
            if ages:
                stale.add_metric([kind], max(ages))
            quarantine.add_metric([kind], sum(int(q or 0) for k, *_, q in rows if k == kind))
        yield from (breakers, stale, quarantine)
        yield from _embedding_lag()


def _embedding_lag() -> Iterator[GaugeMetricFamily]:
    try:
        lag = embedding_lag()
    except DatabaseError:  # the scrape's other figures still count
        return
    if lag is None:
        return  # no answer in time: absent, rather than a made-up figure
    yield GaugeMetricFamily(
        "ingestion_embeddings_pending",
        "Active listings without an embedding of their current version in the active generation",
        value=lag.pending,
    )
    yield GaugeMetricFamily(
        "ingestion_embedding_lag_seconds",
        "How long the oldest listing waiting for its embedding has waited since its fetch",
        value=lag.oldest_s or 0.0,
    )
