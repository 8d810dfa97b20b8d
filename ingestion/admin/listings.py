from django import forms
from django.contrib import admin
from django.db import models, transaction
from django.db.models import Count, QuerySet
from django.http import HttpRequest

from ingestion import merging, tasks, versions
from ingestion.models import Listing, SourceRecord


class SourceRecordInline(admin.TabularInline[SourceRecord, Listing]):
    model = SourceRecord
    fields = ("source", "external_id", "withdrawn", "updated_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True


@admin.register(Listing)
class ListingAdmin(admin.ModelAdmin[Listing]):
    list_display = ("title", "venue", "starts_at", "status", "record_count", "updated_at")
    list_filter = ("status", "fetched_kind")
    search_fields = ("title", "venue")
    date_hierarchy = "starts_at"
    readonly_fields = (
        "content_version",
        "fetched_at",
        "fetched_kind",
        "lexically_searchable_at",
        "created_at",
        "updated_at",
    )
    inlines = (SourceRecordInline,)
    actions = ("merge_listings",)
    # A link typed without a scheme is an https one (Django 6's default, chosen now rather
    # than warned about on every save).
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}

    def get_queryset(self, request: HttpRequest) -> QuerySet[Listing]:
        # One query for the whole page, not a count per row.
        return super().get_queryset(request).annotate(record_total=Count("records"))

    def save_model(
        self, request: HttpRequest, obj: Listing, form: "forms.ModelForm[Listing]", change: bool
    ) -> None:
        if versions.save_edit(obj, form.changed_data):
            # After the commit, or the worker could embed the old text it still reads.
            transaction.on_commit(tasks.schedule_embedding)

    @admin.display(description="records", ordering="record_total")
    def record_count(self, listing: Listing) -> int:
        return int(getattr(listing, "record_total", 0))

    @admin.action(description="Merge selected listings into the oldest one")
    def merge_listings(self, request: HttpRequest, queryset: QuerySet[Listing]) -> None:
        listings = list(queryset.order_by("pk"))
        if len(listings) < 2:
            self.message_user(request, "Select at least two listings to merge.", "error")
            return
        keep = listings[0]
        for other in listings[1:]:
            keep = merging.merge(keep, other)
        transaction.on_commit(tasks.schedule_embedding)  # the kept listing's text changed
        self.message_user(request, f"Merged {len(listings)} listings into “{keep.title}”.")


@admin.register(SourceRecord)
class SourceRecordAdmin(admin.ModelAdmin[SourceRecord]):
    list_display = ("external_id", "source", "listing", "withdrawn", "updated_at")
    # Named: the admin follows only non-null foreign keys by itself, and `listing` may be null.
    list_select_related = ("source", "listing")
    list_filter = ("source__kind", "withdrawn")
    search_fields = ("external_id",)
    readonly_fields = ("source", "external_id", "content_hash", "listing", "data", "withdrawn")
    actions = ("split_records",)

    @admin.action(description="Split selected records into listings of their own")
    def split_records(self, request: HttpRequest, queryset: QuerySet[SourceRecord]) -> None:
        split = 0
        for record in queryset.select_related("source"):
            try:
                merging.split(record)
                split += 1
            except ValueError as exc:
                self.message_user(request, f"{record.external_id}: {exc}", "warning")
        if split:
            transaction.on_commit(tasks.schedule_embedding)  # new listings, and changed ones
        self.message_user(request, f"Split {split} record(s) into listings of their own.")
