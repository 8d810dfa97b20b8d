"""A generation built over the active one's vectors (`manage.py generations build
--copy`): a new index (here halfvec over a vector generation) with no text sent to the
model, completed by the sweep like any build."""

import os
import socket
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from django.db import connection, transaction
from django.test import override_settings
from django.utils import timezone

from ingestion import backend_priority, generations, indexing
from ingestion.embedding import DIMENSIONS, MODEL_NAME, Embedder
from ingestion.indexing import embed_pending_batch
from ingestion.models import IndexGeneration, ListingEmbedding
from ingestion.upsert import apply_draft
from tests.factories import draft, source
from tests.ingestion.test_same_text_embedded_once import TextVectors

pytestmark = pytest.mark.django_db(transaction=True)  # the index is built concurrently


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> TextVectors:
    with override_settings(SEARCH_VECTOR_TYPE="vector"):
        generations.ensure_active_generation(MODEL_NAME, DIMENSIONS)
    encoder = TextVectors()
    monkeypatch.setattr(indexing, "get_embedder", lambda: Embedder(encoder, "fake"))
    return encoder


def _rows(generation: IndexGeneration) -> dict[int, tuple[bytes, int]]:
    return {
        e.listing_id: (np.asarray(e.embedding, dtype=np.float32).tobytes(), e.content_version)
        for e in ListingEmbedding.objects.filter(generation=generation)
    }


def test_a_copy_build_indexes_the_active_vectors_without_the_model(model: TextVectors) -> None:
    with transaction.atomic():
        feed = source("a venue")
        for title in ("Organ recital", "Harpsichord session", "Jazz night"):
            apply_draft(feed, draft(title, title=title), timezone.now())
    assert embed_pending_batch() == 3
    asked = len(model.texts)
    active = generations.active_generation()
    assert active is not None

    with override_settings(SEARCH_VECTOR_TYPE="halfvec"):
        copied = generations.copy_build(active)

    assert (copied.vector_type, copied.state) == ("halfvec", IndexGeneration.State.BUILDING)
    assert _rows(copied) == _rows(active)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.indisvalid, pg_get_indexdef(i.indexrelid) FROM pg_index i"
            " WHERE i.indexrelid = %s::regclass",
            [generations.hnsw_index_name(copied)],
        )
        valid, definition = cursor.fetchone()
    assert valid
    assert "halfvec_cosine_ops" in definition
    # The sweep finds every listing embedded at its version: nothing for the model, and
    # the generation complete at its end (ingestion/tasks.py's embed_pending).
    embed_pending_batch()
    assert len(model.texts) == asked
    assert generations.mark_complete_generations_ready() == 1
    copied.refresh_from_db()
    assert copied.state == IndexGeneration.State.READY


def test_a_retired_generation_is_no_source(model: TextVectors) -> None:
    retired = generations.create_generation(MODEL_NAME, DIMENSIONS)
    generations.retire(retired)
    with pytest.raises(ValueError, match="no vectors"):
        generations.copy_build(retired)


def _listings_embedded() -> IndexGeneration:
    with transaction.atomic():
        feed = source("a venue")
        for title in ("Organ recital", "Jazz night"):
            apply_draft(feed, draft(title, title=title), timezone.now())
    embed_pending_batch()
    active = generations.active_generation()
    assert active is not None
    return active


def _build_classes(active: IndexGeneration) -> list[int]:
    """The scheduling class of the backend that ran each CREATE INDEX of a copy build."""
    classes = []

    def observe(
        execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]
    ) -> Any:
        if sql.startswith("CREATE INDEX"):
            pid = context["connection"].connection.info.backend_pid
            classes.append(os.sched_getscheduler(pid))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(observe):
        generations.copy_build(active)
    return classes


@pytest.mark.usefixtures("model")
def test_the_graph_is_built_on_the_cores_searches_leave_idle() -> None:
    """Its backend in SCHED_IDLE while it builds, and never used again: a new one serves
    the next statement. Without the setting, the build keeps its class."""
    active = _listings_embedded()
    connection.ensure_connection()
    if backend_priority._peer_process(connection.connection.pgconn.socket) == 0:
        pytest.skip("the test database is not a process of this host over a Unix socket")
    built_by = connection.connection.info.backend_pid

    assert _build_classes(active) == [os.SCHED_IDLE]

    connection.ensure_connection()
    assert connection.connection.info.backend_pid != built_by
    with override_settings(GENERATION_BUILD_IDLE=False):
        assert _build_classes(active) == [os.SCHED_OTHER]


def test_only_a_unix_sockets_peer_is_named() -> None:
    """The process at the other end of a Unix socket is named as this host numbers it; a
    TCP peer is not named at all (it may be another host's)."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        assert backend_priority._peer_process(ours.fileno()) == os.getpid()
    server = socket.create_server(("127.0.0.1", 0))
    with server, socket.create_connection(server.getsockname()) as client:
        assert backend_priority._peer_process(client.fileno()) == 0
