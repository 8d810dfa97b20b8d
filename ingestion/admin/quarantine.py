from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from ingestion import retrying, tasks
from ingestion.models import QuarantinedItem


class OpenFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: object) -> list[tuple[str, str]]:
        return [("open", "Open"), ("resolved", "Resolved")]

    def queryset(
        self, request: HttpRequest, queryset: QuerySet[QuarantinedItem]
    ) -> QuerySet[QuarantinedItem]:
        if self.value() == "open":
            return queryset.filter(resolved_at=None)
        if self.value() == "resolved":
            return queryset.exclude(resolved_at=None)
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
        "resolved_at",
    )
    list_filter = (OpenFilter, "source__kind", "permanent")
    search_fields = ("external_id", "reason")
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
    )
    actions = ("retry",)

    @admin.action(description="Retry selected items")
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
        tasks.schedule_embedding()
        if repolled:
            self.message_user(request, f"Re-polling {len(repolled)} source(s).")
