"""Indexed listings for search tests, embedded with the real model."""

import json
from collections.abc import AsyncIterator, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import psycopg
from django.db import transaction
from django.test import AsyncClient
from django.utils import timezone

from ingestion import generations
from ingestion.embedding import DIMENSIONS, MODEL_NAME
from ingestion.indexing import embed_pending_batch
from ingestion.upsert import apply_draft
from retrieval import service
from retrieval.types import FACET_REASONS
from tests.factories import draft, source

TITLES = [
    ("Jazz quartet at the riverside", "Riverside Hall", "Modern jazz standards and bebop."),
    ("Sourdough baking class", "Town Bakery", "Learn to bake bread with a natural starter."),
    ("Children's science fair", "Town Hall", "Robots, volcanoes and a planetarium."),
    ("Organ recital", "St Mary's Church", "Bach and Buxtehude on the restored organ."),
    ("Late-night jazz jam", "The Cellar Bar", "Bring an instrument; the house band starts."),
]


def index_listings() -> None:
    generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
    with transaction.atomic():
        feed = source()
        for number, (title, venue, description) in enumerate(TITLES):
            apply_draft(
                feed,
                draft(
                    f"l{number}", title=title, venue=venue, description=description, starts_at=None
                ),
                timezone.now(),
            )
    while embed_pending_batch():
        pass
    service.forget_searchable_generation()


def new_active_generation() -> int:
    """A new generation of the same model, every listing embedded in it, activated: its id."""
    generation = generations.create_generation(MODEL_NAME, DIMENSIONS)
    while embed_pending_batch():
        pass
    generations.mark_ready(generation)
    generation.refresh_from_db()
    generations.activate(generation)
    return generation.pk


async def search_json(client: AsyncClient, **params: str) -> dict[str, Any]:
    """`GET /api/search` with `params`, which must answer 200; its JSON body."""
    response = await client.get("/api/search", params)
    assert response.status_code == 200, response.content
    body: dict[str, Any] = json.loads(response.content)
    return body


def about_results(reasons: Iterable[str]) -> list[str]:
    """`reasons` (an answer's, or the lines of a chart) but those of the counts on the filters:
    the results never wait for the counts, so on a loaded machine a search may end before
    they do and say so; a test about the results reads the rest."""
    return [r for r in reasons if r not in FACET_REASONS]


# The table each search stage reads: locking it stalls that stage inside Postgres.
LEXICAL_TABLE = "ingestion_listing"
VECTOR_TABLE = "ingestion_listing_embedding"


@asynccontextmanager
async def held_by(url: str, statement: str) -> AsyncIterator[psycopg.AsyncConnection]:
    """Another connection that ran `statement` in a transaction it keeps open meanwhile,
    holding the locks it took; rolled back (the statement undone) on the way out."""
    holder = await psycopg.AsyncConnection.connect(url)
    try:
        await holder.execute(statement)
        yield holder
    finally:
        await holder.rollback()
        await holder.close()


def tables_locked(url: str, *tables: str) -> "AbstractAsyncContextManager[psycopg.AsyncConnection]":
    """Another connection holding ACCESS EXCLUSIVE on `tables` meanwhile."""
    return held_by(url, f"LOCK TABLE {', '.join(tables)} IN ACCESS EXCLUSIVE MODE")


def embeddings_locked(url: str) -> "AbstractAsyncContextManager[psycopg.AsyncConnection]":
    """Another connection holding ACCESS EXCLUSIVE on the embeddings table meanwhile."""
    return tables_locked(url, VECTOR_TABLE)


async def statements_running(url: str, tag: str) -> int:
    """Statements of the search hot path tagged `tag` (retrieval/pg/statement.py) running now."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as observer:
        cursor = await observer.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid() AND state = 'active' AND query LIKE %s",
            [f"/* {tag} */%"],
        )
        row = await cursor.fetchone()
    return int(row[0]) if row else 0
