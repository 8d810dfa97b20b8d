"""Index generations: create one with its own HNSW index, activate it atomically.

Invariant: every embedding row belongs to exactly one generation, and each generation's
HNSW index covers only its own rows, so a search of generation N never sees vectors of
another generation and a generation may use another model or dimension count.
"""

from django.db import connection, transaction
from django.utils import timezone

from ingestion.models import IndexGeneration

# Bump when the text that is embedded for a listing changes: vectors of the old pipeline
# are then stale, and a new generation must be built.
TEXT_PIPELINE_VERSION = 1


def hnsw_index_name(generation: IndexGeneration) -> str:
    return f"listing_embedding_hnsw_g{generation.pk}"


def create_generation(embedding_model: str, dimensions: int) -> IndexGeneration:
    generation = IndexGeneration.objects.create(
        embedding_model=embedding_model,
        dimensions=dimensions,
        text_pipeline_version=TEXT_PIPELINE_VERSION,
    )
    # The column is dimensionless so generations may differ; the cast gives HNSW a fixed
    # dimension, and the partial predicate keeps the index to this generation's rows.
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE INDEX IF NOT EXISTS {hnsw_index_name(generation)} "
            f"ON ingestion_listing_embedding "
            f"USING hnsw ((embedding::vector({int(dimensions)})) vector_cosine_ops) "
            f"WHERE generation_id = {int(generation.pk)}"
        )
    return generation


@transaction.atomic
def activate(generation: IndexGeneration) -> None:
    """Make `generation` the active one; the previous one stays READY for rollback."""
    # Lock all generation rows so two activations cannot interleave.
    list(IndexGeneration.objects.select_for_update().order_by("pk"))
    IndexGeneration.objects.filter(state=IndexGeneration.State.ACTIVE).exclude(
        pk=generation.pk
    ).update(state=IndexGeneration.State.READY)
    generation.state = IndexGeneration.State.ACTIVE
    generation.activated_at = timezone.now()
    generation.save(update_fields=["state", "activated_at"])


def active_generation() -> IndexGeneration | None:
    return IndexGeneration.objects.filter(state=IndexGeneration.State.ACTIVE).first()


def ensure_active_generation(embedding_model: str, dimensions: int) -> IndexGeneration:
    """The active generation, creating and activating a first one on a fresh install."""
    with transaction.atomic():
        active = active_generation()
        if active is not None:
            return active
        generation = create_generation(embedding_model, dimensions)
        activate(generation)
        return generation
