"""The listings changelist's filters: where a listing came from, when it happens, how
recently it changed, and whether the vector search knows its current text.

Each filter is one WHERE clause on the page's one query (no lookups of its own per row),
and none of them reads the clock more than once."""

from datetime import timedelta

from django.contrib import admin
from django.db.models import Exists, OuterRef, QuerySet
from django.http import HttpRequest
from django.utils import timezone

from ingestion.models import IndexGeneration, Listing, ListingEmbedding, Source

Choices = list[tuple[str, str]]


class SourceKindFilter(admin.SimpleListFilter):
    title = "source kind"
    parameter_name = "source_kind"

    def lookups(self, request: HttpRequest, model_admin: object) -> Choices:
        return [(str(value), str(label)) for value, label in Source.Kind.choices]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Listing]) -> QuerySet[Listing]:
        if self.value() is None:
            return queryset
        # The kinds kept on the listing by a trigger (migrations/0006), GIN-indexed: no
        # join to the records, and a listing with two kinds' records counts once.
        return queryset.filter(source_kinds__contains=[self.value()])


class WhenFilter(admin.SimpleListFilter):
    title = "when"
    parameter_name = "when"

    def lookups(self, request: HttpRequest, model_admin: object) -> Choices:
        return [("upcoming", "Upcoming or on now"), ("past", "Past"), ("undated", "Undated")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Listing]) -> QuerySet[Listing]:
        # current_until is what public searches call "not ended yet" (null when undated),
        # so an editor's "upcoming" is the search's.
        now = timezone.now()
        match self.value():
            case "upcoming":
                return queryset.filter(current_until__gte=now)
            case "past":
                return queryset.filter(current_until__lt=now)
            case "undated":
                return queryset.filter(current_until=None)
        return queryset


class FreshFilter(admin.SimpleListFilter):
    title = "changed"
    parameter_name = "fresh"
    WINDOW = timedelta(hours=1)

    def lookups(self, request: HttpRequest, model_admin: object) -> Choices:
        return [("hour", "In the last hour")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Listing]) -> QuerySet[Listing]:
        if self.value() == "hour":
            return queryset.filter(updated_at__gte=timezone.now() - self.WINDOW)
        return queryset


class EmbeddedFilter(admin.SimpleListFilter):
    """Whether the active generation of the listing's audience has a vector of it, and of
    its current text (its content version) or an older one the worker is yet to redo."""

    title = "in the active generation"
    parameter_name = "embedded"

    def lookups(self, request: HttpRequest, model_admin: object) -> Choices:
        return [
            ("current", "Current text embedded"),
            ("stale", "Older text embedded"),
            ("missing", "Not embedded"),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Listing]) -> QuerySet[Listing]:
        # A listing's vectors are only ever in generations of its own audience, so the
        # active one among them is its audience's.
        in_active = ListingEmbedding.objects.filter(
            listing=OuterRef("pk"), generation__state=IndexGeneration.State.ACTIVE
        )
        current = in_active.filter(content_version=OuterRef("content_version"))
        match self.value():
            case "current":
                return queryset.filter(Exists(current))
            case "stale":
                return queryset.filter(Exists(in_active)).exclude(Exists(current))
            case "missing":
                return queryset.exclude(Exists(in_active))
        return queryset
