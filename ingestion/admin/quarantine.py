"""Quarantine in the admin: what could not be ingested, from which source and poll, and
why; an editorial record corrected and retried, any item retried in bulk (its source
polled again) or dismissed with a note; open items counted per source and reason."""

from typing import Any

from django import forms
from django.contrib import admin
from django.db import transaction
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.utils import timezone

from ingestion import retrying, tasks
from ingestion.admin.confirming import answered, ask
from ingestion.models import QuarantinedItem

RETRY = "_retry"  # the change form's "Save and retry" button
COUNTS_SHOWN = 20  # source and reason pairs above the list, the largest first


class NoteForm(forms.Form):
    note = forms.CharField(
        max_length=1000,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Why these items need no retry; kept on each item.",
    )


class StateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: object) -> list[tuple[str, str]]:
        return [("open", "Open"), ("resolved", "Resolved"), ("dismissed", "Dismissed")]

    def queryset(
        self, request: HttpRequest, queryset: QuerySet[QuarantinedItem]
    ) -> QuerySet[QuarantinedItem]:
        match self.value():
            case "open":
                return queryset.filter(resolved_at=None)
            case "resolved":  # retried and ingested
                return queryset.exclude(resolved_at=None).filter(dismissal_note="")
            case "dismissed":
                return queryset.exclude(resolved_at=None).exclude(dismissal_note="")
        return queryset


@admin.register(QuarantinedItem)
class QuarantinedItemAdmin(admin.ModelAdmin[QuarantinedItem]):
    list_display = (
        "source",
        "position",
        "external_id",
        "reason",
        "permanent",
        "created_at",
        "state",
    )
    list_filter = (StateFilter, "source__kind", "source", "permanent")
    search_fields = ("external_id", "reason")
    # The poll is the payload the item came in; source and poll show as links to theirs.
    readonly_fields = (
        "source",
        "poll",
        "position",
        "external_id",
        "reason",
        "permanent",
        "excerpt",
        "created_at",
        "retry_requested_at",
        "resolved_at",
        "dismissal_note",
    )
    actions = ("retry", "dismiss")

    def get_readonly_fields(
        self, request: HttpRequest, obj: QuarantinedItem | None = None
    ) -> tuple[str, ...]:
        # Only an open editorial record keeps the JSON an editor can correct and retry.
        if obj is not None and obj.raw and obj.resolved_at is None:
            return self.readonly_fields
        return (*self.readonly_fields, "raw")

    @admin.display(description="state")
    def state(self, item: QuarantinedItem) -> str:
        if item.dismissal_note:
            return "dismissed"
        if item.resolved_at is not None:
            return "resolved"
        return "retrying" if item.retry_requested_at else "open"

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        counts = (
            QuarantinedItem.objects.filter(resolved_at=None)
            .values("source", "source__name", "reason")
            .annotate(items=Count("pk"))
            .order_by("-items", "source__name", "reason")[:COUNTS_SHOWN]
        )
        return super().changelist_view(request, {**(extra_context or {}), "counts": counts})

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        # The template's "Save and retry" button shows where `raw` is editable.
        extra = {**(extra_context or {}), "retry_button": RETRY}
        return super().change_view(request, object_id, form_url, extra)

    def response_change(self, request: HttpRequest, obj: QuarantinedItem) -> HttpResponse:
        if RETRY not in request.POST or not self.has_change_permission(request, obj):
            return super().response_change(request, obj)
        # The corrected JSON is saved by now, in this same transaction.
        message = retrying.retry_record(obj)
        transaction.on_commit(tasks.schedule_embedding)
        self.message_user(request, f"{obj.external_id or obj.pk}: {message}")
        return HttpResponseRedirect(request.path)

    @admin.action(description="Retry selected items", permissions=["change"])
    def retry(self, request: HttpRequest, queryset: QuerySet[QuarantinedItem]) -> None:
        now = timezone.now()
        repolled: set[int] = set()
        for item in queryset.filter(resolved_at=None).select_related("source"):
            if item.raw:
                # An editorial record (possibly corrected here): validate and apply it again.
                message = retrying.retry_record(item)
                self.message_user(request, f"{item.external_id or item.pk}: {message}")
                continue
            item.retry_requested_at = now
            item.save(update_fields=["retry_requested_at"])
            if item.source_id not in repolled:
                repolled.add(item.source_id)
                tasks.poll_source.delay(item.source_id, force=True)
        transaction.on_commit(tasks.schedule_embedding)
        if repolled:
            self.message_user(request, f"Re-polling {len(repolled)} source(s).")

    @admin.action(description="Dismiss selected items (asks why)", permissions=["change"])
    def dismiss(
        self, request: HttpRequest, queryset: QuerySet[QuarantinedItem]
    ) -> TemplateResponse | None:
        items = list(queryset.filter(resolved_at=None).select_related("source").order_by("pk"))
        form = answered(request, NoteForm)
        if not form.is_valid():
            return ask(
                self,
                request,
                action="dismiss",
                selected=items,
                template="admin/ingestion/quarantine_dismiss.html",
                title="Dismiss quarantined items",
                form=form,
                items=items,
            )
        dismissed = QuarantinedItem.objects.filter(
            pk__in=[item.pk for item in items], resolved_at=None
        ).update(resolved_at=timezone.now(), dismissal_note=form.cleaned_data["note"])
        self.message_user(request, f"Dismissed {dismissed} item(s).")
        return None
