"""Sources in the admin: created and edited, paused and resumed, polled now; each one's
health (its breaker, last errors, last success, how long since it, and its latest polls
with their counts); a filter of the failing ones (ingestion/admin/source_filters.py); and,
for an editorial source, links to enter records (ingestion/admin/editorial_entry.py).

The changelist's columns come from annotations and the change page's polls from one
query each, so neither asks once per source or per poll."""

from collections.abc import Callable
from typing import TYPE_CHECKING

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.loader import render_to_string
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.timesince import timesince

from ingestion import tasks
from ingestion.admin import editorial_entry
from ingestion.admin.source_filters import FAILED_POLLS, HealthFilter, with_last_poll
from ingestion.models import Poll, Source

if TYPE_CHECKING:
    from django.contrib.admin.options import _ListDisplayT

POLLS_SHOWN = 10  # on a source's page, the latest first
FAILED_POLLS_SHOWN = 5  # their errors, under the source's last error


def pause(sources: QuerySet[Source]) -> int:
    """The scheduler claims active sources only (ingestion/scheduling.py)."""
    return sources.update(active=False)


def resume(sources: QuerySet[Source]) -> int:
    # Due at once: the next beat claims it, rather than at the end of an interval that
    # may have run out long ago or be hours off.
    return sources.update(active=True, next_poll_at=None)


def poll_now(sources: QuerySet[Source]) -> int:
    """A forced poll queued for each source with something to poll (not one fed only by
    the API or uploads)."""
    polled = list(sources.exclude(url="").values_list("pk", flat=True))
    for source_id in polled:
        tasks.poll_source.delay(source_id, force=True)
    return len(polled)


HEALTH = (
    "breaker_state",
    "breaker_opened_at",
    "last_success_at",
    "since_last_success",
    "last_errors",
    "recent_polls",
    "next_poll_at",
)
CONDITIONAL_GET = ("etag", "last_modified")


@admin.register(Source)
class SourceAdmin(admin.ModelAdmin[Source]):
    list_display = (
        "name",
        "kind_name",
        "active",
        "breaker_state",
        "last_poll",
        "since_last_success",
        "last_error_short",
        "open_quarantine",
    )
    list_filter = (HealthFilter, "kind", "active", "breaker_state")
    search_fields = ("name", "url")
    fieldsets = (
        (None, {"fields": ("name", "kind", "url", "active", "poll_interval_s")}),
        ("Health", {"fields": HEALTH}),
        ("Conditional GET", {"fields": CONDITIONAL_GET, "classes": ("collapse",)}),
    )
    readonly_fields = (*HEALTH, *CONDITIONAL_GET)  # what polls write, never an editor
    actions = ("pause_sources", "resume_sources", "poll_sources_now", "close_breaker")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Source]:
        return with_last_poll(super().get_queryset(request)).annotate(
            open_quarantine_count=Count("quarantine", filter=Q(quarantine__resolved_at=None))
        )

    def get_list_display(self, request: HttpRequest) -> "_ListDisplayT[Source]":
        shown = tuple(super().get_list_display(request))
        return (*shown, "enter_records") if editorial_entry.may_enter_records(request) else shown

    @admin.display(description="open quarantine", ordering="open_quarantine_count")
    def open_quarantine(self, source: Source) -> int:
        return int(getattr(source, "open_quarantine_count", 0))

    @admin.display(description="last poll", ordering="last_poll_status")
    def last_poll(self, source: Source) -> str:
        status = getattr(source, "last_poll_status", None)
        return Poll.Status(status).label if status else "none yet"

    @admin.display(description="since last success", ordering="-last_success_at")
    def since_last_success(self, source: Source) -> str:
        # The lag the gauge ingestion_seconds_since_last_successful_poll reports, per source.
        return timesince(source.last_success_at) if source.last_success_at else "never"

    # The kind's value (feed, calendar, editorial), not its label: the list has many columns
    # to fit, and the filter beside it says what each means.
    @admin.display(description="kind", ordering="kind")
    def kind_name(self, source: Source) -> str:
        return source.kind

    @admin.display(description="last error")
    def last_error_short(self, source: Source) -> str:
        return source.last_error[:60]

    @admin.display(description="records")
    def enter_records(self, source: Source) -> SafeString | str:
        if source.kind != Source.Kind.EDITORIAL:
            return ""
        return format_html(
            '<a href="{}">add</a> · <a href="{}">upload</a>',
            reverse("admin:ingestion_source_record_add", args=[source.pk]),
            reverse("admin:ingestion_source_upload", args=[source.pk]),
        )

    @admin.display(description="last errors")
    def last_errors(self, source: Source) -> str:
        if source.pk is None:
            return ""
        failed = source.polls.filter(status__in=FAILED_POLLS).order_by("-started_at", "-pk")
        return render_to_string(
            "admin/ingestion/source/last_errors.html",
            {"source": source, "failed": failed[:FAILED_POLLS_SHOWN]},
        )

    @admin.display(description="latest polls")
    def recent_polls(self, source: Source) -> str:
        if source.pk is None:
            return ""
        polls = source.polls.order_by("-started_at", "-pk")[:POLLS_SHOWN]
        rows = [(poll, [getattr(poll, name) for name in Poll.COUNTS]) for poll in polls]
        return render_to_string(
            "admin/ingestion/source/recent_polls.html", {"rows": rows, "counts": Poll.COUNTS}
        )

    @admin.action(description="Pause polling", permissions=["change"])
    def pause_sources(self, request: HttpRequest, queryset: QuerySet[Source]) -> None:
        self.message_user(request, f"Paused {pause(queryset)} source(s): no polls until resumed.")

    @admin.action(description="Resume polling", permissions=["change"])
    def resume_sources(self, request: HttpRequest, queryset: QuerySet[Source]) -> None:
        self.message_user(
            request, f"Resumed {resume(queryset)} source(s): polled at the next beat."
        )

    @admin.action(description="Poll now (ignoring the interval)", permissions=["change"])
    def poll_sources_now(self, request: HttpRequest, queryset: QuerySet[Source]) -> None:
        self.message_user(request, f"Queued {poll_now(queryset)} poll(s).")

    @admin.action(description="Close the circuit breaker", permissions=["change"])
    def close_breaker(self, request: HttpRequest, queryset: QuerySet[Source]) -> None:
        queryset.update(breaker_state="closed", breaker_opened_at=None, breaker_window={})
        self.message_user(request, "Breakers closed; the next poll goes ahead.")

    def get_urls(self) -> list[URLPattern]:
        def view(function: Callable[..., HttpResponse], name: str, route: str) -> URLPattern:
            wrapped = self.admin_site.admin_view(function)
            return path(f"<int:source_id>/{route}/", wrapped, name=f"ingestion_source_{name}")

        return [
            view(self.record_add_view, "record_add", "records/add"),
            view(self.upload_view, "upload", "upload"),
            view(self.pause_view, "pause", "pause"),
            view(self.resume_view, "resume", "resume"),
            view(self.poll_view, "poll", "poll"),
            *super().get_urls(),
        ]

    def record_add_view(self, request: HttpRequest, source_id: int) -> HttpResponse:
        return editorial_entry.add_record_view(self, request, source_id)

    def upload_view(self, request: HttpRequest, source_id: int) -> HttpResponse:
        return editorial_entry.upload_view(self, request, source_id)

    def pause_view(self, request: HttpRequest, source_id: int) -> HttpResponse:
        return self._control(request, source_id, pause, "Paused: no polls until resumed.")

    def resume_view(self, request: HttpRequest, source_id: int) -> HttpResponse:
        return self._control(request, source_id, resume, "Resumed: polled at the next beat.")

    def poll_view(self, request: HttpRequest, source_id: int) -> HttpResponse:
        return self._control(request, source_id, poll_now, "Poll queued.")

    def _control(
        self,
        request: HttpRequest,
        source_id: int,
        do: Callable[[QuerySet[Source]], int],
        done: str,
    ) -> HttpResponse:
        """A change page's button: POST only, and only for who may change the source."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        source = get_object_or_404(Source, pk=source_id)
        if not self.has_change_permission(request, source):
            raise PermissionDenied
        do(Source.objects.filter(pk=source.pk))
        self.message_user(request, done, messages.SUCCESS)
        return HttpResponseRedirect(reverse("admin:ingestion_source_change", args=[source.pk]))


@admin.register(Poll)
class PollAdmin(admin.ModelAdmin[Poll]):
    list_display = (
        "source",
        "started_at",
        "status",
        *Poll.COUNTS,
        "error",
    )
    list_filter = ("status", "source__kind")
    date_hierarchy = "started_at"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
