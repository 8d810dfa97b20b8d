"""Index generations: create one with its own HNSW index, activate it atomically.

Invariant: every embedding row belongs to exactly one generation, and each generation's
HNSW index covers only its own rows, so a search of generation N never sees vectors of
another generation and a generation may use another model or dimension count. A
generation embeds the listings of one audience (ingestion.models.Audience), so a judged
collection's vectors are never in the index a public search reads; each audience has at
most one active generation.
"""

from typing import TYPE_CHECKING, Any, TypedDict

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Func, IntegerField, OuterRef, QuerySet, Subquery
from django.utils import timezone

from ingestion.models import Audience, IndexGeneration, Listing, ListingEmbedding

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

# Bump when the text that is embedded for a listing changes: vectors of the old pipeline
# are then stale, and a new generation must be built.
TEXT_PIPELINE_VERSION = 1


def hnsw_index_name(generation: IndexGeneration | int) -> str:
    generation_id = generation if isinstance(generation, int) else generation.pk
    return f"listing_embedding_hnsw_g{int(generation_id)}"


def hnsw_index_sql(
    generation_id: int, dimensions: int, vector_type: str = "vector", *, concurrently: bool = False
) -> str:
    """The statement that gives a generation its own HNSW index (also a migration's, which
    cannot call create_generation with the models of its time)."""
    # The column is dimensionless so generations may differ; the cast gives HNSW a fixed
    # dimension and type, and the partial predicate keeps the index to this generation's
    # rows. A search casts the same way (retrieval/pg/vector.py), or the planner cannot
    # use the index.
    kind = IndexGeneration.VectorType(vector_type).value
    return (
        f"CREATE INDEX {'CONCURRENTLY ' if concurrently else ''}IF NOT EXISTS "
        f"{hnsw_index_name(generation_id)} "
        f"ON ingestion_listing_embedding "
        f"USING hnsw ((embedding::{kind}({int(dimensions)})) {kind}_cosine_ops) "
        f"WITH (m = {int(settings.SEARCH_HNSW_M)}, "
        f"ef_construction = {int(settings.SEARCH_HNSW_EF_CONSTRUCTION)}) "
        f"WHERE generation_id = {int(generation_id)}"
    )


def create_generation(
    embedding_model: str, dimensions: int, audience: str = Audience.PUBLIC, *, index: bool = True
) -> IndexGeneration:
    """A new generation, BUILDING; with its HNSW index unless `index` is False (the caller
    then builds it once the rows are in: `copy_build`)."""
    generation = IndexGeneration.objects.create(
        embedding_model=embedding_model,
        dimensions=dimensions,
        text_pipeline_version=TEXT_PIPELINE_VERSION,
        audience=audience,
        vector_type=settings.SEARCH_VECTOR_TYPE,
    )
    if index:
        with connection.cursor() as cursor:
            cursor.execute(hnsw_index_sql(generation.pk, dimensions, generation.vector_type))
    return generation


# The vectors of a generation of the same model and text pipeline, copied as they are: only
# the index over them differs. The dates and a series' occurrences are the triggers' to fill.
_COPY_VECTORS = """
INSERT INTO ingestion_listing_embedding
    (listing_id, generation_id, embedding, content_version, embedded_at, text_digest)
SELECT listing_id, %(into)s, embedding, content_version, embedded_at, text_digest
FROM ingestion_listing_embedding WHERE generation_id = %(source)s
"""


def copy_build(source: IndexGeneration) -> IndexGeneration:
    """A new generation whose index is built as the settings now say (its vector type,
    `m`, `ef_construction`) over `source`'s vectors, copied rather than embedded again:
    for a change of index, not of model or text. Left BUILDING: the embedding sweep then
    embeds only the listings changed since, and makes it READY. Runs in autocommit.

    The rows are copied in the transaction that makes the generation, so no sweep sees it
    half copied and embeds what is about to arrive; the graph is built once they are all
    there (pgvector: far faster than inserting into it row by row), concurrently, so that
    ingestion writing vectors of other generations meanwhile is not blocked."""
    if (
        source.state == IndexGeneration.State.RETIRED
        or source.text_pipeline_version != TEXT_PIPELINE_VERSION
    ):
        raise ValueError(f"{source} has no vectors of today's text pipeline to copy")
    with transaction.atomic():
        generation = create_generation(
            source.embedding_model, source.dimensions, source.audience, index=False
        )
        with connection.cursor() as cursor:
            cursor.execute(_COPY_VECTORS, {"into": generation.pk, "source": source.pk})
    with connection.cursor() as cursor:
        # Searches go on meanwhile: the graph is built by this backend alone (Postgres'
        # default gives it two parallel workers more, three processes on two cores), so it
        # takes longer and leaves the other cores to them.
        workers = int(settings.GENERATION_BUILD_PARALLEL_WORKERS)
        cursor.execute(f"SET max_parallel_maintenance_workers = {workers}")
        try:
            cursor.execute(
                hnsw_index_sql(
                    generation.pk, generation.dimensions, generation.vector_type, concurrently=True
                )
            )
        finally:
            cursor.execute("RESET max_parallel_maintenance_workers")
    return generation


@transaction.atomic
def activate(generation: IndexGeneration) -> None:
    """Make `generation` the active one of its audience; the previous one stays READY for
    rollback."""
    # Lock all generation rows so two activations cannot interleave.
    list(IndexGeneration.objects.select_for_update().order_by("pk"))
    IndexGeneration.objects.filter(
        state=IndexGeneration.State.ACTIVE, audience=generation.audience
    ).exclude(pk=generation.pk).update(state=IndexGeneration.State.READY)
    generation.state = IndexGeneration.State.ACTIVE
    generation.activated_at = timezone.now()
    generation.save(update_fields=["state", "activated_at"])


def active_generation(audience: str = Audience.PUBLIC) -> IndexGeneration | None:
    return IndexGeneration.objects.filter(
        state=IndexGeneration.State.ACTIVE, audience=audience
    ).first()


def ensure_active_generation(
    embedding_model: str, dimensions: int, audience: str = Audience.PUBLIC
) -> IndexGeneration:
    """The audience's active generation, creating and activating a first one on a fresh
    install (or a judged collection's first import)."""
    with transaction.atomic():
        active = active_generation(audience)
        if active is not None:
            return active
        generation = create_generation(embedding_model, dimensions, audience)
        activate(generation)
        return generation


class Progress(TypedDict):
    embedded: int
    active_listings: int


def with_progress(
    queryset: QuerySet[IndexGeneration],
) -> "QuerySet[WithAnnotations[IndexGeneration, Progress]]":
    """`queryset` with each generation's `embedded` (active listings with a vector of their
    current content version) and `active_listings` (of its audience), in the one query
    however many rows."""
    active = Listing.objects.filter(status=Listing.Status.ACTIVE, audience=OuterRef("audience"))
    current = ListingEmbedding.objects.filter(
        generation=OuterRef("pk"),
        listing__status=Listing.Status.ACTIVE,
        content_version=F("listing__content_version"),
    )
    return queryset.annotate(
        embedded=_count_of(current, "listing_id"), active_listings=_count_of(active, "pk")
    )


def _count_of(rows: QuerySet[Any], column: str) -> Subquery:
    # count() as a plain function, not an aggregate: the ORM then adds no GROUP BY and the
    # subquery is one row, the count of all of `rows`.
    counted = rows.order_by().annotate(n=Func(F(column), function="count")).values("n")
    return Subquery(counted, output_field=IntegerField())


def progress(generation: IndexGeneration) -> tuple[int, int]:
    """(listings embedded at their current version, active listings) for a generation."""
    return (
        with_progress(IndexGeneration.objects.filter(pk=generation.pk))
        .values_list("embedded", "active_listings")
        .get()
    )


def mark_ready(generation: IndexGeneration) -> None:
    IndexGeneration.objects.filter(pk=generation.pk, state=IndexGeneration.State.BUILDING).update(
        state=IndexGeneration.State.READY
    )


@transaction.atomic
def mark_complete_generations_ready() -> int:
    """Every building generation that holds a current vector of each active listing of its
    audience becomes READY; returns how many. The embedding sweep calls
    it after its last commit: a claim another sweep holds uncommitted still counts as
    missing here, and that sweep calls it in turn once its vectors are committed. A listing
    committed just after the statement is embedded in the ready generation by the next
    sweep (indexing.py embeds ready generations too), so being ready never goes stale.
    One made to be activated when complete is activated then."""
    building = IndexGeneration.objects.filter(state=IndexGeneration.State.BUILDING)
    # Nearly always none: then the embeddings, which the progress counts read, are not
    # touched at the end of every sweep (nor waited for, should something hold them).
    if not building.exists():
        return 0
    complete = with_progress(building).filter(embedded__gte=F("active_listings"))
    # Every generation row locked in activate's order, so that the two never deadlock and
    # of two sweeps finding one complete only the first activates it.
    list(IndexGeneration.objects.select_for_update().order_by("pk"))
    ready = list(
        IndexGeneration.objects.filter(
            pk__in=complete.values("pk"), state=IndexGeneration.State.BUILDING
        )
    )
    IndexGeneration.objects.filter(pk__in=[g.pk for g in ready]).update(
        state=IndexGeneration.State.READY
    )
    for generation in ready:
        if generation.activate_when_complete:
            activate(generation)
    return len(ready)


def previous_generation(audience: str = Audience.PUBLIC) -> IndexGeneration | None:
    """The generation of `audience` that was active before the current one, if it is kept."""
    return (
        IndexGeneration.objects.filter(
            state=IndexGeneration.State.READY, audience=audience, activated_at__isnull=False
        )
        .order_by("-activated_at")
        .first()
    )


def rollback(audience: str = Audience.PUBLIC) -> IndexGeneration:
    """Re-activate the generation of `audience` that was active before the current one."""
    previous = previous_generation(audience)
    if previous is None:
        raise ValueError("no previously active generation to roll back to")
    activate(previous)
    return previous


def retire(generation: IndexGeneration) -> None:
    """Drop a generation's vectors and its index; the active one cannot be retired. Runs
    in autocommit, not in a transaction: the index is dropped concurrently."""
    if generation.state == IndexGeneration.State.ACTIVE:
        raise ValueError("the active generation cannot be retired; activate another first")
    # Retired before its vectors go: deleting a live generation's vector marks its listing
    # an embedding candidate (migrations/0012), and these are not wanted again.
    generation.state = IndexGeneration.State.RETIRED
    generation.retired_at = timezone.now()
    generation.save(update_fields=["state", "retired_at"])
    with connection.cursor() as cursor:
        # A plain DROP INDEX queues for an exclusive lock on the embeddings table behind any
        # open reader, and every vector search of every generation queues behind it.
        # Retired already, so re-running a retirement that stopped half way finishes it.
        cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {hnsw_index_name(generation)}")
        cursor.execute(
            "DELETE FROM ingestion_listing_embedding WHERE generation_id = %s", [generation.pk]
        )
        # Its backfill marks (a build given up) want nothing now; left, every claim and
        # settling would read through them (migrations/0013: a mark a write touched is no
        # longer a backfill mark, so none of those goes).
        cursor.execute(
            "DELETE FROM ingestion_embedding_candidate WHERE backfill_generation_id = %s",
            [generation.pk],
        )
