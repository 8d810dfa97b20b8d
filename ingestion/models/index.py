"""The vector index's schema: index generations (an embedding model and its text pipeline),
the listings' embeddings in each, and the embedding candidates, the listings that may
still want one."""

from django.contrib.postgres.fields import ArrayField, DateTimeRangeField
from django.db import models
from django.db.models import Q
from pgvector.django import VectorField

from ingestion.models.listings import Listing, audience_field


class IndexGeneration(models.Model):
    """An embedding model + dimensions + text pipeline; vectors are stamped with one."""

    class State(models.TextChoices):
        BUILDING = "building"
        # Fully built but not serving: a generation waiting to be activated, or the
        # previous active one kept for rollback until it is retired.
        READY = "ready"
        ACTIVE = "active"
        RETIRED = "retired"

    class VectorType(models.TextChoices):
        """What its HNSW index holds: the column keeps full precision either way, so a
        later generation may choose again from the same rows."""

        VECTOR = "vector"
        HALFVEC = "halfvec"

    embedding_model = models.CharField(max_length=200)
    dimensions = models.PositiveSmallIntegerField()
    # Generations made before the choice existed were built with vector indexes.
    vector_type = models.CharField(
        max_length=8, choices=VectorType.choices, default=VectorType.VECTOR, db_default="vector"
    )
    text_pipeline_version = models.PositiveSmallIntegerField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.BUILDING)
    # The listings it embeds: public ones, or a judged collection's (Audience).
    audience = audience_field()
    created_at = models.DateTimeField(auto_now_add=True)
    activated_at = models.DateTimeField(null=True, blank=True)
    retired_at = models.DateTimeField(null=True, blank=True)
    # Made by a migration whose listings changed under the active generation (0018):
    # activated by the embedding sweep the moment it is complete, with no one to ask.
    activate_when_complete = models.BooleanField(default=False, db_default=False)

    class Meta:
        constraints = [
            # The database, not application code, guarantees a single active generation
            # for each audience.
            models.UniqueConstraint(
                fields=["audience"],
                condition=Q(state="active"),
                name="one_active_generation_per_audience",
            )
        ]

    def __str__(self) -> str:
        return f"generation {self.pk} ({self.embedding_model}, {self.state})"


class ListingEmbedding(models.Model):
    """Kept apart from `Listing`: vector index maintenance and locks on this table can
    never block lexical search. Each generation gets its own partial HNSW index
    (see ingestion/generations.py), so dimensions may differ between generations. Only
    listings that can be shown have rows: withdrawing one deletes its rows in the same
    transaction (a trigger, migrations/0003), so a vector search never spends a slot on it."""

    pk = models.CompositePrimaryKey("listing", "generation")
    listing = models.ForeignKey(Listing, on_delete=models.CASCADE)
    generation = models.ForeignKey(IndexGeneration, on_delete=models.CASCADE)
    embedding = VectorField()
    content_version = models.PositiveIntegerField()
    embedded_at = models.DateTimeField()
    # The listing's dates and a series' occurrences, copied by triggers (migrations/0006,
    # 0016): a vector search filters on them in the rows its index scan reads, without a
    # join.
    starts_at = models.DateTimeField(null=True, editable=False)
    current_until = models.DateTimeField(null=True, editable=False)
    occurrences = ArrayField(
        DateTimeRangeField(), default=list, db_default=models.Value("{}"), editable=False
    )
    # SHA-256 of the text the vector was made from: a listing of the same text in the same
    # generation is given this vector rather than the model's time (ingestion/indexing.py).
    text_digest = models.BinaryField(null=True, editable=False)

    class Meta:
        db_table = "ingestion_listing_embedding"
        indexes = [
            models.Index(
                fields=["generation", "text_digest"],
                condition=models.Q(text_digest__isnull=False),
                name="listing_embedding_texts",
            ),
            # The rows are mostly their vector (469 MB at 100,000 listings): finding the
            # listings without an up-to-date one reads this 4 MB instead (docs/reliability.md).
            models.Index(
                fields=["generation", "listing"],
                include=["content_version"],
                name="listing_embedding_versions",
            ),
        ]

    def __str__(self) -> str:
        return f"listing {self.listing_id} in generation {self.generation_id}"


class EmbeddingCandidate(models.Model):
    """A listing that may want an embedding in a live generation: where the embedding
    claim and the lag look (ingestion/pending.py), so that their cost follows the work to
    do rather than the listings there are. Database triggers write it (migrations/0012):
    a listing inserted, or changed in content version, status or audience, while active;
    an embedding of an active listing in a live generation deleted; a generation created,
    for every active listing of its audience (`backfill_generation`: only marked so, pending
    in that generation alone, and claimed after the others: migrations/0013). Each write
    takes a new `seq`. A candidate
    found to want nothing is deleted only if its `seq` is still the one read
    (ingestion/embedding_claim.py), so a change made meanwhile is never lost."""

    # No foreign-key constraint: a trigger may mark a listing a cascade is deleting; a
    # candidate without a listing wants nothing, and the next claim deletes it.
    listing = models.OneToOneField(
        Listing,
        primary_key=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    seq = models.BigIntegerField(editable=False)
    backfill_generation = models.ForeignKey(
        IndexGeneration,
        null=True,
        editable=False,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )

    class Meta:
        db_table = "ingestion_embedding_candidate"

    def __str__(self) -> str:
        return f"listing {self.listing_id} (mark {self.seq})"
