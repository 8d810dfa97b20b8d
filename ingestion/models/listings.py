"""Listings and where they come from: the audiences that may find them, the sources that
supply them, the records each source gives, and the canonical listings de-duplicated from
those records, with their full-text search columns and indexes."""

from datetime import datetime
from typing import Final

from django.contrib.postgres.fields import ArrayField, DateTimeRangeField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models import Q
from psycopg.types.range import Range

# Listing text weights: a title hit outranks a venue or alias hit, which outranks the
# description. The tsvector is a stored generated column, so it is current the moment a
# listing's transaction commits. Postgres declares array_to_string() only STABLE, so the
# migration wraps it in an IMMUTABLE function a generated column may call.
SEARCH_CONFIG = "english"


class Audience:
    """Who may find a listing: the public, or one judged collection's own audience
    (`Audience.of_evaluation_set`). Evaluation listings (issue 10) come in through the
    real ingestion path but never reach a public search: the public stages, hydration and
    the spelling vocabulary read public listings only, and each audience's vectors live in
    a generation of its own, so the public HNSW index never holds them. One audience per
    judged collection, not one for them all: a collection is scored on its own documents
    and term statistics, as its judgments assume, whatever else has been imported.
    A source's audience is its listings', fixed when they are made."""

    PUBLIC: Final = "public"
    _EVALUATION_PREFIX: Final = "evaluation:"

    @staticmethod
    def of_evaluation_set(name: str) -> str:
        return Audience._EVALUATION_PREFIX + name

    @staticmethod
    def is_evaluation(audience: str) -> bool:
        return audience.startswith(Audience._EVALUATION_PREFIX)


# "evaluation:" and an evaluation set's name (evaluation.models.EvaluationSet.name).
AUDIENCE_MAX_LENGTH = 220


def audience_field() -> models.CharField[str, str]:
    # Not editable: an editor changing a source's audience would hide its listings from
    # the public, or publish a judged collection.
    return models.CharField(max_length=AUDIENCE_MAX_LENGTH, default=Audience.PUBLIC, editable=False)


class Source(models.Model):
    class Kind(models.TextChoices):
        FEED = "feed", "Publisher feed (RSS/Atom)"
        CALENDAR = "calendar", "Venue calendar (iCalendar)"
        EDITORIAL = "editorial", "Editorial records"

    name = models.CharField(max_length=200, unique=True)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    audience = audience_field()
    url = models.CharField(max_length=2000, blank=True, help_text="http(s) URL or local file path")
    active = models.BooleanField(default=True)
    poll_interval_s = models.PositiveIntegerField(default=900)
    created_at = models.DateTimeField(auto_now_add=True)
    next_poll_at = models.DateTimeField(null=True, blank=True, db_index=True)
    # Conditional GET: what the server said last time.
    etag = models.CharField(max_length=500, blank=True)
    last_modified = models.CharField(max_length=100, blank=True)
    payload_hash = models.CharField(max_length=64, blank=True)
    # Circuit breaker (resilience/breaker.py): state, and its sliding window of outcomes.
    breaker_state = models.CharField(max_length=16, default="closed")
    breaker_opened_at = models.DateTimeField(null=True, blank=True)
    breaker_window = models.JSONField(default=dict, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    last_error_permanent = models.BooleanField(null=True, blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"


def _gin(name: str, field: str) -> GinIndex:
    """A GIN index that takes each insert directly (fastupdate off), not into a pending
    list: every search scans that list whole, and autovacuum's ANALYZE merged it while
    ingestion ran, timing out every lexical stage for 1.6 s (migrations/0014)."""
    return GinIndex(fields=[field], name=name, fastupdate=False)


class Listing(models.Model):
    class Status(models.TextChoices):
        ACTIVE = "active"
        WITHDRAWN = "withdrawn"

    title = models.CharField(max_length=500)
    description = models.TextField(blank=True)
    venue = models.CharField(max_length=300, blank=True)
    aliases = ArrayField(models.CharField(max_length=300), default=list, blank=True)
    starts_at = models.DateTimeField(null=True, blank=True)
    ends_at = models.DateTimeField(null=True, blank=True)
    timezone = models.CharField(max_length=64, blank=True)
    all_day = models.BooleanField(default=False)
    # A series (one listing for a recurring event): each occurrence as [start, until],
    # until as `current_until` reads an end, sooner first; moved ones at their new time,
    # cancelled ones absent. Empty for a one-off. starts_at is then the first start and
    # ends_at the last end, so every condition on the listing's own dates (and the
    # embeddings' copies) passes a superset, and the occurrences decide (migrations/0016).
    # Not editable: its source's next version would undo an edit; an editor withdraws
    # a date instead (`withdrawn_dates`).
    occurrences = ArrayField(
        DateTimeRangeField(), default=list, db_default=models.Value("{}"), editable=False
    )
    # The series' rule in words where it is simple ("every Tuesday"), else blank.
    recurrence = models.CharField(max_length=100, editable=False, db_default="")
    # The starts of a series' dates an editor withdrew: as `withdrawn_by_editor` for a
    # whole listing, a source's next version of the series never brings them back.
    withdrawn_dates = ArrayField(
        models.DateTimeField(), default=list, db_default=models.Value("{}"), editable=False
    )
    url = models.URLField(max_length=2000, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    # An editor withdrew it: only an editor's restore brings it back, never a source's
    # next version of one of its records (ingestion/upsert.py).
    withdrawn_by_editor = models.BooleanField(default=False)
    audience = audience_field()
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Bumped whenever the embedded text changes; an embedding of an older version is stale.
    content_version = models.PositiveIntegerField(default=1)
    # When and by what kind of source the input behind the latest change was fetched: where
    # the ingestion lag starts (its end is observed as the batch commits, ingestion/batches.py).
    fetched_at = models.DateTimeField(null=True, blank=True)
    fetched_kind = models.CharField(max_length=16, blank=True)
    search_vector = models.GeneratedField(
        expression=(
            SearchVector("title", weight="A", config=SEARCH_CONFIG)
            + SearchVector("venue", weight="B", config=SEARCH_CONFIG)
            + SearchVector(
                models.Func(
                    "aliases",
                    models.Value(" "),
                    function="immutable_array_to_string",
                    output_field=models.TextField(),
                ),
                weight="B",
                config=SEARCH_CONFIG,
            )
            + SearchVector("description", weight="C", config=SEARCH_CONFIG)
        ),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    # The search vector's length in tokens per label (title, venue and aliases,
    # description): BM25's document length (migrations/0020, retrieval/pg/lexical.py).
    search_lengths = models.GeneratedField(
        expression=models.Func(
            "title",
            "venue",
            "aliases",
            "description",
            function="listing_search_lengths",
            output_field=ArrayField(models.IntegerField(), size=3),
        ),
        output_field=ArrayField(models.IntegerField(), size=3),
        db_persist=True,
    )
    # What public searches filter on (migrations/0006): until when the listing counts as
    # not ended (null when undated), its venue's and aliases' words unaccented, and
    # the kinds of the sources behind it (kept by a trigger on the records).
    current_until = models.GeneratedField(
        expression=models.Func(
            "starts_at",
            "ends_at",
            "all_day",
            function="listing_current_until",
            output_field=models.DateTimeField(),
        ),
        output_field=models.DateTimeField(),
        db_persist=True,
    )
    venue_terms = models.GeneratedField(
        expression=models.Func(
            "venue",
            "aliases",
            function="listing_venue_terms",
            output_field=ArrayField(models.TextField()),
        ),
        output_field=ArrayField(models.TextField()),
        db_persist=True,
    )
    source_kinds = ArrayField(
        models.CharField(max_length=16), default=list, blank=True, editable=False
    )
    # Undated de-duplication's key (migrations/0008): the title lower-cased, unaccented,
    # punctuation stripped and spaces collapsed. A draft's title goes through the same SQL
    # function, so both sides fold alike.
    normalised_title = models.GeneratedField(
        expression=models.Func(
            "title", function="listing_normalised_title", output_field=models.TextField()
        ),
        output_field=models.TextField(),
        db_persist=True,
    )
    # Title alone: retrieval ranks title matches first when a term matches too many rows.
    title_vector = models.GeneratedField(
        expression=SearchVector("title", config=SEARCH_CONFIG),
        output_field=SearchVectorField(),
        db_persist=True,
    )

    class Meta:
        indexes = [
            _gin("listing_search_vector_gin", "search_vector"),
            _gin("listing_title_vector_gin", "title_vector"),
            models.Index(fields=["starts_at"], name="listing_starts_at"),
            _gin("listing_venue_terms_gin", "venue_terms"),
            _gin("listing_source_kinds_gin", "source_kinds"),
            # What undated de-duplication looks up, and only the rows it may match.
            models.Index(
                fields=["audience", "normalised_title"],
                condition=Q(starts_at__isnull=True, status="active"),
                name="listing_undated_title",
            ),
            # With listing_embedding_versions: what finding the listings still to embed
            # reads (ingestion/embedding_claim.py, ingestion/embedding_lag.py), so that
            # it never reads either table's rows (descriptions; vectors).
            models.Index(
                fields=["audience", "id"],
                include=["content_version", "fetched_at"],
                condition=Q(status="active"),
                name="listing_active_versions",
            ),
            # What the lexical stage reads a common query's title matches from, in order
            # (retrieval/pg/lexical.py): a title's terms beside its id, a tenth of a
            # listing's row, so the read never walks the rows' descriptions.
            models.Index(
                fields=["audience", "id"],
                include=["title_vector"],
                condition=Q(status="active"),
                name="listing_active_titles",
            ),
        ]

    def __str__(self) -> str:
        return self.title


def occurrence(start: datetime, end: datetime) -> Range[datetime]:
    """One of a series' occurrences as `Listing.occurrences` holds it: both ends included,
    so an occurrence without a length is a point, not an empty range."""
    return Range[datetime](start, end, "[]")


class SourceRecord(models.Model):
    """One input item as a source identifies it (RSS guid, iCal UID + RECURRENCE-ID, ...)."""

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="records")
    external_id = models.CharField(max_length=1000)
    content_hash = models.CharField(max_length=64)
    listing = models.ForeignKey(
        Listing, on_delete=models.SET_NULL, null=True, blank=True, related_name="records"
    )
    withdrawn = models.BooleanField(default=False)
    # The draft as last seen, so an editor's split can rebuild a listing from its records.
    data = models.JSONField(default=dict)
    first_seen_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["source", "external_id"], name="record_per_source_id")
        ]

    def __str__(self) -> str:
        return f"{self.source_id}:{self.external_id}"
