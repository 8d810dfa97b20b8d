"""The listings admin: find a listing, see where it came from and what the vector search
knows of it, edit it, withdraw or restore it (saying why), merge duplicates.

Every page is a fixed number of queries however many rows it shows
(tests/admin/test_admin_listings.py pins them)."""

from collections.abc import Iterable
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.admin.widgets import AdminSplitDateTime
from django.contrib.contenttypes.models import ContentType
from django.db import models, transaction
from django.db.models import Count, OuterRef, Q, QuerySet, Subquery
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from ingestion import merging, tasks, versions
from ingestion.admin.confirming import answered, ask, is_confirmed
from ingestion.admin.listing_filters import (
    EmbeddedFilter,
    FreshFilter,
    SourceKindFilter,
    WhenFilter,
)
from ingestion.models import IndexGeneration, Listing, ListingEmbedding, SourceRecord

# What a status change's history entry starts with; the change page finds the latest by it.
STATUS_NOTES = {Listing.Status.WITHDRAWN: "Withdrawn: ", Listing.Status.ACTIVE: "Restored: "}
# The aliases as one text, so the changelist's search matches inside them as it does
# inside the title and venue (an array has no icontains of its own).
_ALIAS_TEXT = models.Func(
    "aliases",
    models.Value(" "),
    function="immutable_array_to_string",
    output_field=models.TextField(),
)


class ReasonForm(forms.Form):
    reason = forms.CharField(
        max_length=500,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Kept in the listing's history, with your name.",
    )


class SourceRecordInline(admin.TabularInline[SourceRecord, Listing]):
    """A listing's provenance: the records it is made of, each linked to its source."""

    model = SourceRecord
    # A read-only foreign key is shown as a link to its admin page: the record's source.
    fields = ("source", "external_id", "withdrawn", "updated_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def get_queryset(self, request: HttpRequest) -> QuerySet[SourceRecord]:
        return super().get_queryset(request).select_related("source")

    def has_add_permission(self, request: HttpRequest, obj: Listing | None = None) -> bool:
        return False  # records come from sources, never typed in beside a listing


@admin.register(Listing)
class ListingAdmin(admin.ModelAdmin[Listing]):
    list_display = (
        "title",
        "venue",
        "starts_at",
        "status",
        "kinds",
        "record_count",
        "updated_at",
    )
    list_filter = (SourceKindFilter, "status", WhenFilter, FreshFilter, EmbeddedFilter)
    # alias_text: the annotation get_queryset adds.
    search_fields = ("title", "venue", "alias_text")
    date_hierarchy = "starts_at"
    # The status changes only through the actions, which ask for a reason.
    readonly_fields = (
        "status",
        "withdrawn_by_editor",
        "series_dates",
        "embedded_in",
        "status_note",
        "content_version",
        "fetched_at",
        "fetched_kind",
        "created_at",
        "updated_at",
    )
    inlines = (SourceRecordInline,)
    actions = ("withdraw", "restore", "merge_listings")
    # A link typed without a scheme is an https one (Django 6's default, chosen now rather
    # than warned about on every save).
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}

    def formfield_for_dbfield(
        self, db_field: "models.Field[Any, Any]", request: HttpRequest, **kwargs: Any
    ) -> forms.Field | None:
        field = super().formfield_for_dbfield(db_field, request, **kwargs)
        # The admin's date and time boxes share a label that names neither, so a screen
        # reader announced them unnamed (axe-core, tests/browser/test_editor_in_browser.py).
        if field is not None and isinstance(field.widget, AdminSplitDateTime):
            date_box, time_box = field.widget.widgets
            date_box.attrs["aria-label"] = f"{field.label}: date"
            time_box.attrs["aria-label"] = f"{field.label}: time"
        return field

    def get_queryset(self, request: HttpRequest) -> QuerySet[Listing]:
        # One query for the whole page, not a count per row.
        return (
            super()
            .get_queryset(request)
            .alias(alias_text=_ALIAS_TEXT)
            .annotate(record_total=Count("records"))
        )

    def has_merge_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("ingestion.merge_listing")

    def save_model(
        self, request: HttpRequest, obj: Listing, form: "forms.ModelForm[Listing]", change: bool
    ) -> None:
        if versions.save_edit(obj, form.changed_data):
            # After the commit, or the worker could embed the old text it still reads.
            transaction.on_commit(tasks.schedule_embedding)

    @admin.display(description="records", ordering="record_total")
    def record_count(self, listing: Listing) -> int:
        return int(getattr(listing, "record_total", 0))

    @admin.display(description="source kinds")
    def kinds(self, listing: Listing) -> str:
        return ", ".join(listing.source_kinds)

    @admin.display(description="embedded in")
    def embedded_in(self, listing: Listing) -> str:
        """Each live generation of the listing's audience, and whether its vector of the
        listing is of the current text (content version), an older one, or missing."""
        if listing.pk is None:
            return "—"
        version = ListingEmbedding.objects.filter(generation=OuterRef("pk"), listing=listing)
        live = (
            IndexGeneration.objects.filter(audience=listing.audience)
            .exclude(state=IndexGeneration.State.RETIRED)
            .annotate(embedded_version=Subquery(version.values("content_version")[:1]))
            .order_by("pk")
        )
        lines = [(str(generation), _embedded(listing, generation)) for generation in live]
        return format_html_join("", "<div>{}: {}</div>", lines) or "no live generation"

    @admin.display(description="series dates")
    def series_dates(self, listing: Listing) -> str:
        """A series' rule and dates (UTC), and the dates an editor withdrew; "—" for a
        one-off. Read-only: the calendar's next version would undo an edit here."""
        if not listing.occurrences and not listing.withdrawn_dates:
            return "—"
        lines = [(f"{o.lower:%a %d %b %Y %H:%M}", f"{o.upper:%H:%M}") for o in listing.occurrences]
        withdrawn = ", ".join(f"{start:%a %d %b %Y %H:%M}" for start in listing.withdrawn_dates)
        return format_html(
            "<p>{}</p>{}<p>{}</p>",
            listing.recurrence or "Dates as listed",
            format_html_join("", "<div>{} to {} UTC</div>", lines),
            f"Withdrawn by an editor: {withdrawn}" if withdrawn else "",
        )

    @admin.display(description="last withdrawn or restored")
    def status_note(self, listing: Listing) -> str:
        if listing.pk is None:
            return "—"
        entry = (
            LogEntry.objects.filter(
                content_type=ContentType.objects.get_for_model(Listing),
                object_id=str(listing.pk),
            )
            .filter(_any_prefix("change_message", STATUS_NOTES.values()))
            .select_related("user")
            .order_by("-action_time")
            .first()
        )
        if entry is None:
            return "—"
        return f"{entry.change_message} ({entry.user}, {entry.action_time:%Y-%m-%d %H:%M} UTC)"

    @admin.action(description="Withdraw selected listings (asks why)", permissions=["change"])
    def withdraw(
        self, request: HttpRequest, queryset: QuerySet[Listing]
    ) -> TemplateResponse | None:
        return self._set_status(request, queryset, Listing.Status.WITHDRAWN, "withdraw")

    @admin.action(description="Restore selected listings (asks why)", permissions=["change"])
    def restore(self, request: HttpRequest, queryset: QuerySet[Listing]) -> TemplateResponse | None:
        return self._set_status(request, queryset, Listing.Status.ACTIVE, "restore")

    def _set_status(
        self,
        request: HttpRequest,
        queryset: QuerySet[Listing],
        status: Listing.Status,
        action: str,
    ) -> TemplateResponse | None:
        listings = list(queryset.order_by("pk"))
        form = answered(request, ReasonForm)
        if not form.is_valid():
            return ask(
                self,
                request,
                action=action,
                selected=listings,
                template="admin/ingestion/listing_status.html",
                title=f"{action.capitalize()} listings",
                form=form,
                changing=[listing for listing in listings if listing.status != status],
                unchanged=[listing for listing in listings if listing.status == status],
                status=status,
            )
        editor = request.user.pk
        assert editor is not None  # the admin lets only logged-in staff this far
        with transaction.atomic():
            # Only those not already so, read again under the update: a listing a source
            # withdrew meanwhile gets no second entry. Withdrawing deletes its vectors in
            # the same transaction (a trigger, migrations/0003).
            changed = Listing.objects.filter(pk__in=[listing.pk for listing in listings])
            changed = changed.exclude(status=status).select_for_update()
            pks = list(changed.values_list("pk", flat=True))
            Listing.objects.filter(pk__in=pks).update(
                status=status,
                withdrawn_by_editor=status == Listing.Status.WITHDRAWN,
                updated_at=timezone.now(),
            )
            LogEntry.objects.log_actions(
                user_id=editor,
                queryset=Listing.objects.filter(pk__in=pks),
                action_flag=CHANGE,
                change_message=STATUS_NOTES[status] + form.cleaned_data["reason"],
            )
        if status == Listing.Status.ACTIVE and pks:
            # A restored listing has no vector (withdrawing dropped it): the worker's queue.
            transaction.on_commit(tasks.schedule_embedding)
        self.message_user(request, f"{action.capitalize()}: {len(pks)} listing(s) changed.")
        return None

    @admin.action(description="Merge selected listings into the oldest one", permissions=["merge"])
    def merge_listings(
        self, request: HttpRequest, queryset: QuerySet[Listing]
    ) -> TemplateResponse | None:
        listings = list(queryset.order_by("pk"))
        if len(listings) < 2:
            self.message_user(request, "Select at least two listings to merge.", "error")
            return None
        keep, others = listings[0], listings[1:]
        if not is_confirmed(request):
            moving = SourceRecord.objects.filter(listing__in=others).select_related(
                "source", "listing"
            )
            return ask(
                self,
                request,
                action="merge_listings",
                selected=listings,
                template="admin/ingestion/listing_merge.html",
                title="Merge listings",
                keep=keep,
                others=others,
                records=moving.order_by("listing_id", "pk"),
                aliases=merging.merged_aliases(keep, others),
            )
        with transaction.atomic():
            for other in others:
                keep = merging.merge(keep, other)
        transaction.on_commit(tasks.schedule_embedding)  # the kept listing's text changed
        self.message_user(request, f"Merged {len(listings)} listings into “{keep.title}”.")
        return None


def _embedded(listing: Listing, generation: IndexGeneration) -> str:
    version = getattr(generation, "embedded_version", None)
    if version == listing.content_version:
        return f"its current text (version {version})"
    if version is not None:
        return f"an older text (version {version} of {listing.content_version}), to be redone"
    if listing.status != Listing.Status.ACTIVE:
        return "not embedded (withdrawn listings never are)"
    return "not embedded yet"


def _any_prefix(field: str, prefixes: Iterable[str]) -> Q:
    query = Q()
    for prefix in prefixes:
        query |= Q(**{f"{field}__startswith": prefix})
    return query
