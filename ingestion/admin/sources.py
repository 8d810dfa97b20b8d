from django import forms
from django.contrib import admin, messages
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import URLPattern, path, reverse
from django.utils import timezone

from ingestion import tasks
from ingestion.models import Poll, Source
from ingestion.polling import ingest_payload


class UploadForm(forms.Form):
    file = forms.FileField(help_text="Editorial records as CSV (header row) or a JSON list")


@admin.register(Source)
class SourceAdmin(admin.ModelAdmin[Source]):
    list_display = (
        "name",
        "kind",
        "active",
        "breaker_state",
        "last_success_at",
        "last_error_short",
        "last_error_permanent",
        "open_quarantine",
    )
    list_filter = ("kind", "active", "breaker_state")
    search_fields = ("name", "url")
    readonly_fields = (
        "breaker_state",
        "breaker_opened_at",
        "last_success_at",
        "last_error",
        "last_error_permanent",
        "last_error_at",
        "etag",
        "last_modified",
        "next_poll_at",
    )
    exclude = ("breaker_window", "payload_hash")
    actions = ("poll_now", "close_breaker")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Source]:
        return (
            super()
            .get_queryset(request)
            .annotate(
                open_quarantine_count=Count("quarantine", filter=Q(quarantine__resolved_at=None))
            )
        )

    @admin.display(description="open quarantine", ordering="open_quarantine_count")
    def open_quarantine(self, source: Source) -> int:
        return int(getattr(source, "open_quarantine_count", 0))

    @admin.display(description="last error")
    def last_error_short(self, source: Source) -> str:
        return source.last_error[:80]

    @admin.action(description="Poll now (ignoring the interval)", permissions=["change"])
    def poll_now(self, request: HttpRequest, queryset: QuerySet[Source]) -> None:
        for source in queryset:
            tasks.poll_source.delay(source.pk, force=True)
        self.message_user(request, f"Queued {queryset.count()} poll(s).")

    @admin.action(description="Close the circuit breaker", permissions=["change"])
    def close_breaker(self, request: HttpRequest, queryset: QuerySet[Source]) -> None:
        queryset.update(breaker_state="closed", breaker_opened_at=None, breaker_window={})
        self.message_user(request, "Breakers closed; the next poll goes ahead.")

    def get_urls(self) -> list[URLPattern]:
        upload = self.admin_site.admin_view(self.upload_view)
        return [
            path("<int:source_id>/upload/", upload, name="ingestion_source_upload"),
            *super().get_urls(),
        ]

    def upload_view(self, request: HttpRequest, source_id: int) -> HttpResponse:
        source = get_object_or_404(Source, pk=source_id, kind=Source.Kind.EDITORIAL)
        if not self.has_change_permission(request, source):
            return HttpResponse(status=403)
        form = UploadForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            upload = form.cleaned_data["file"]
            poll = ingest_payload(
                source, upload.read(), started_at=timezone.now(), name_hint=upload.name
            )
            tasks.schedule_embedding()
            level = messages.SUCCESS if poll.status == Poll.Status.OK else messages.ERROR
            self.message_user(request, _summary(poll), level)
            return HttpResponseRedirect(reverse("admin:ingestion_source_change", args=[source.pk]))
        context = {**self.admin_site.each_context(request), "form": form, "source": source}
        return render(request, "admin/ingestion/source_upload.html", context)


def _summary(poll: Poll) -> str:
    if poll.status == Poll.Status.REJECTED:
        return f"File rejected: {poll.error}"
    return (
        f"{poll.items} records: {poll.new} new, {poll.updated} updated, "
        f"{poll.unchanged} unchanged, {poll.withdrawn} withdrawn, "
        f"{poll.quarantined} quarantined (see Quarantined items)."
    )


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
