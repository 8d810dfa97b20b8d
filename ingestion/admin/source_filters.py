"""What the sources admin knows of each source's health, as queryset annotations (so the
changelist asks once for all its rows, never once per row), and the "failing sources"
filter built on them.

A failing source is an active one whose breaker is not closed, or whose latest poll failed
(its fetch) or was rejected (its payload). The first half is what the alert
IngestionSourceBreakerOpen counts (deploy/prometheus/rules.yml, over the active sources
ingestion/state_metrics.py gauges); the second catches a source failing before its breaker
opens. A paused source is not failing: nobody polls it, and its state is as it was left.
"""

from django.contrib import admin
from django.db.models import OuterRef, Q, QuerySet, Subquery
from django.http import HttpRequest

from ingestion.models import Poll, Source

FAILED_POLLS = (Poll.Status.FAILED, Poll.Status.REJECTED)


def with_last_poll(queryset: QuerySet[Source]) -> QuerySet[Source]:
    """`last_poll_status`: the latest poll's status (None before the first), in the
    queryset's own statement."""
    latest = Poll.objects.filter(source=OuterRef("pk")).order_by("-started_at", "-pk")
    return queryset.annotate(last_poll_status=Subquery(latest.values("status")[:1]))


def failing() -> Q:
    """The failing sources, of a queryset `with_last_poll`."""
    return Q(active=True) & (~Q(breaker_state="closed") | Q(last_poll_status__in=FAILED_POLLS))


class HealthFilter(admin.SimpleListFilter):
    title = "health"
    parameter_name = "health"

    def lookups(self, request: HttpRequest, model_admin: object) -> list[tuple[str, str]]:
        return [("failing", "Failing sources")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Source]) -> QuerySet[Source]:
        return queryset.filter(failing()) if self.value() == "failing" else queryset
