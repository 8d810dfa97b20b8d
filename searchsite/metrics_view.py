"""GET /metrics: this process's (or, with PROMETHEUS_MULTIPROC_DIR, every process's)
counters and histograms, as django-prometheus exports them, plus gauges read from the
database at scrape time."""

from django.http import HttpRequest, HttpResponse
from django_prometheus.exports import ExportToDjangoView
from prometheus_client import CollectorRegistry, generate_latest

from evaluation.guardrail import GuardrailCollector
from ingestion.state_metrics import IngestionStateCollector

_state = CollectorRegistry(auto_describe=False)
_state.register(IngestionStateCollector())
_state.register(GuardrailCollector())


def metrics(request: HttpRequest) -> HttpResponse:
    response: HttpResponse = ExportToDjangoView(request)  # django-prometheus is untyped
    response.write(generate_latest(_state))
    return response
