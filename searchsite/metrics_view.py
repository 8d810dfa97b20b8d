"""GET /metrics: this process's (or, with PROMETHEUS_MULTIPROC_DIR, every process's)
counters and histograms, plus gauges read from the database at scrape time."""

import os

from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

from ingestion.state_metrics import IngestionStateCollector

_state = CollectorRegistry(auto_describe=False)
_state.register(IngestionStateCollector())


def metrics(request: HttpRequest) -> HttpResponse:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
    else:
        registry = REGISTRY
    body = generate_latest(registry) + generate_latest(_state)
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
