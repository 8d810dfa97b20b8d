"""Source records in the admin, and splitting a wrong merge: each selected record gets a
listing of its own again, after a page saying what each split will do."""

from dataclasses import dataclass

from django.contrib import admin
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse

from ingestion import merging, tasks
from ingestion.admin.confirming import ask, is_confirmed
from ingestion.models import Listing, SourceRecord


@dataclass(frozen=True)
class PlannedSplit:
    record: SourceRecord
    # None when the record cannot be split, and then `problem` says why.
    new_title: str | None
    problem: str | None


@dataclass(frozen=True)
class SplitPlan:
    splits: list[PlannedSplit]
    # Each listing records leave, with the record it is rebuilt from (its latest left).
    rebuilt: list[tuple[Listing, SourceRecord]]


def plan_splits(records: list[SourceRecord]) -> SplitPlan:
    """What `merging.split` will do to `records`, split one after another in this order,
    without changing anything: a listing keeps its last record, however many of its
    records are selected. Two queries (the records and their listings' records)."""
    listing_ids = {record.listing_id for record in records if record.listing_id is not None}
    left: dict[int, list[SourceRecord]] = {pk: [] for pk in listing_ids}
    siblings = SourceRecord.objects.filter(listing_id__in=listing_ids).order_by(
        "-updated_at", "-pk"
    )
    for sibling in siblings:
        assert sibling.listing_id is not None
        left[sibling.listing_id].append(sibling)
    splits = []
    touched: dict[int, Listing] = {}
    for record in records:
        listing = record.listing
        if listing is None:
            splits.append(PlannedSplit(record, None, "it has no listing"))
        elif len(left[listing.pk]) < 2:
            splits.append(PlannedSplit(record, None, "it is its listing's last record"))
        else:
            left[listing.pk] = [other for other in left[listing.pk] if other.pk != record.pk]
            touched[listing.pk] = listing
            splits.append(PlannedSplit(record, record.data.get("title", listing.title), None))
    rebuilt = [(listing, left[pk][0]) for pk, listing in touched.items()]
    return SplitPlan(splits, rebuilt)


@admin.register(SourceRecord)
class SourceRecordAdmin(admin.ModelAdmin[SourceRecord]):
    list_display = ("external_id", "source", "listing", "withdrawn", "updated_at")
    # Named: the admin follows only non-null foreign keys by itself, and `listing` may be null.
    list_select_related = ("source", "listing")
    list_filter = ("source__kind", "withdrawn")
    search_fields = ("external_id",)
    readonly_fields = ("source", "external_id", "content_hash", "listing", "data", "withdrawn")
    actions = ("split_records",)

    def has_split_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("ingestion.split_listing")

    @admin.action(
        description="Split selected records into listings of their own", permissions=["split"]
    )
    def split_records(
        self, request: HttpRequest, queryset: QuerySet[SourceRecord]
    ) -> TemplateResponse | None:
        # In pk order both times, so the splits done are the ones the page showed.
        records = list(queryset.select_related("source", "listing").order_by("pk"))
        if not is_confirmed(request):
            return ask(
                self,
                request,
                action="split_records",
                selected=records,
                template="admin/ingestion/record_split.html",
                title="Split records",
                plan=plan_splits(records),
            )
        split = 0
        for record in records:
            try:
                merging.split(record)
                split += 1
            except ValueError as exc:
                self.message_user(request, f"{record.external_id}: {exc}", "warning")
        if split:
            transaction.on_commit(tasks.schedule_embedding)  # new listings, and changed ones
        self.message_user(request, f"Split {split} record(s) into listings of their own.")
        return None
