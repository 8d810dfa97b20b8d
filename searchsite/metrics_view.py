"""GET /metrics: this process's (or, with PROMETHEUS_MULTIPROC_DIR, every process's)
counters and histograms, as django-prometheus exports them, plus gauges read from the
database at scrape time.

Only for scrapers: a request from METRICS_ALLOWED_NETWORKS (loopback by default), or one
carrying `Authorization: Bearer <METRICS_BEARER_TOKEN>`. Anyone else gets a 404, as if
there were nothing here: the figures say how the site degrades and what it ingests.
Each scrape first drops the live gauges of processes that are gone
(searchsite/metrics_files.py)."""

import hmac
import ipaddress
import os
from pathlib import Path

from django.conf import settings
from django.db import DatabaseError, connection
from django.http import Http404, HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest

from evaluation.guardrail import GuardrailCollector
from ingestion.state_metrics import IngestionStateCollector
from searchsite.metrics_files import WrittenFilesCollector, sweep_dead_processes

_state = CollectorRegistry(auto_describe=False)
_state.register(IngestionStateCollector())
_state.register(GuardrailCollector())


def may_scrape(request: HttpRequest) -> bool:
    token: str | None = settings.METRICS_BEARER_TOKEN
    if token:
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(given.encode(), token.encode()):
            return True
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:  # no address (a Unix socket): not from an allowed network
        return False
    return any(address in network for network in settings.METRICS_ALLOWED_NETWORKS)


def metrics(request: HttpRequest) -> HttpResponse:
    if not may_scrape(request):
        raise Http404()
    return HttpResponse(_process_figures() + _database_figures(), content_type=CONTENT_TYPE_LATEST)


def _process_figures() -> bytes:
    """Every process's figures with PROMETHEUS_MULTIPROC_DIR, else this process's."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not directory:
        return generate_latest(REGISTRY)
    sweep_dead_processes(Path(directory))
    registry = CollectorRegistry()
    registry.register(WrittenFilesCollector(Path(directory)))
    return generate_latest(registry)


def _database_figures() -> bytes:
    """The gauges read from Postgres, or none when it cannot be reached: a scrape waits
    for a connection once (DATABASE_STALL_TIMEOUT_S at most), not once per collector."""
    try:
        connection.ensure_connection()
    except DatabaseError:
        return b""
    return generate_latest(_state)
