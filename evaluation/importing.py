"""Importing a judged collection: its documents as editorial records of the set's own
source, through the real ingestion path, embedded inline; its queries and judgments into
the evaluation set.

Invariants a change must keep:
- the documents only ever enter through `ingest_payload` of a source whose audience is
  the set's own (refused otherwise), so a public search can never find them, nor an
  evaluation of another set, and a
  search path is measured on the code that serves the public;
- re-importing the same files changes nothing: records come back unchanged (content
  hashes), no listing is made, and the queries and judgments are the same;
- the queries and judgments are replaced in one transaction, so an evaluation never
  reads one import's queries with another's judgments.

A document without a title (BEIR corpora often have none) takes the opening of its
text as its title, since editorial records require one; a document with neither is
quarantined by the ingestion path and counted, its judgments kept (they still count
against any search path that cannot find it).
"""

import json
import textwrap
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from django.db import transaction
from django.utils import timezone
from tqdm import tqdm

from evaluation.collections import CollectionError, Document, JudgedCollection, Skipped
from evaluation.formats import read_collection
from evaluation.models import EvaluationQuery, EvaluationSet, Judgment
from ingestion import generations
from ingestion.embedding import DIMENSIONS, MODEL_NAME
from ingestion.indexing import embed_pending_batch, pending_count
from ingestion.models import Audience, Poll, Source
from ingestion.polling import ingest_payload
from retrieval.pg import vocabulary

CHUNK_SIZE = 500
# Long enough to say what the document is about, short enough to read as a title.
TITLE_FROM_TEXT_CHARS = 120
DOCUMENT_COUNTS = ("new", "updated", "unchanged", "quarantined")


@dataclass(frozen=True)
class ImportReport:
    evaluation_set: EvaluationSet
    documents: dict[str, int]  # DOCUMENT_COUNTS, summed over the chunks' polls
    queries: int
    judged_pairs: int
    skipped: Skipped
    embedded: int


def import_collection(
    path: Path,
    *,
    name: str | None = None,
    queries: Path | None = None,
    qrels: Path | None = None,
    qids: Path | None = None,
    chunk_size: int = CHUNK_SIZE,
    progress: bool = True,
) -> ImportReport:
    """Import the collection in folder `path` as the evaluation set `name` (default: the
    folder's base name); `queries`, `qrels` and `qids` as `read_collection` takes them.
    Raises `CollectionError` for files that do not make a collection, or a source of that
    name that is not an evaluation source."""
    set_name = name or path.resolve().name
    collection = read_collection(path, queries=queries, qrels=qrels, qids=qids)
    source = _evaluation_source(set_name)
    generation = generations.ensure_active_generation(MODEL_NAME, DIMENSIONS, source.audience)
    documents = _ingest_documents(source, collection.documents, chunk_size, progress)
    embedded = _embed_inline(generation.pk, progress)
    # The set's term statistics, for the lexical stage to weigh its terms by now rather
    # than at the next scheduled refresh.
    vocabulary.refresh()
    evaluation_set = _replace_queries_and_judgments(set_name, source, collection)
    return ImportReport(
        evaluation_set=evaluation_set,
        documents=documents,
        queries=len(collection.queries),
        judged_pairs=collection.judged_pairs,
        skipped=collection.skipped,
        embedded=embedded,
    )


def _evaluation_source(set_name: str) -> Source:
    source, _ = Source.objects.get_or_create(
        name=f"evaluation: {set_name}",
        defaults={
            "kind": Source.Kind.EDITORIAL,
            "audience": Audience.of_evaluation_set(set_name),
            "url": "",
            "active": False,  # nothing to poll: the poller must never pick it up
        },
    )
    expected = Audience.of_evaluation_set(set_name)
    if source.audience != expected or source.kind != Source.Kind.EDITORIAL:
        # Importing into it would publish the judged documents to every public search.
        raise CollectionError(f"source {source.name!r} exists and is not an evaluation source")
    return source


def _ingest_documents(
    source: Source, documents: Sequence[Document], chunk_size: int, progress: bool
) -> dict[str, int]:
    counts = dict.fromkeys(DOCUMENT_COUNTS, 0)
    with tqdm(total=len(documents), desc="documents", unit="doc", disable=not progress) as bar:
        for number, chunk in enumerate(_chunks(documents, chunk_size)):
            payload = json.dumps([_record(document) for document in chunk]).encode()
            # A snapshot resolves the source's quarantine entries of earlier polls: right
            # for the first chunk (a re-import supersedes the last import's), wrong for the
            # others (they would resolve the entries of the chunks before them).
            poll = ingest_payload(
                source,
                payload,
                started_at=timezone.now(),
                name_hint="collection.json",
                snapshot=number == 0,
            )
            if poll.status == Poll.Status.REJECTED:  # our own JSON: a bug, not bad input
                raise CollectionError(f"ingestion rejected a chunk of documents: {poll.error}")
            for count in DOCUMENT_COUNTS:
                counts[count] += getattr(poll, count)
            bar.update(len(chunk))
    return counts


def _record(document: Document) -> dict[str, str]:
    title = document.title or textwrap.shorten(
        document.text, TITLE_FROM_TEXT_CHARS, placeholder=" …"
    )
    return {"id": document.id, "title": title, "description": document.text}


def _chunks(documents: Sequence[Document], size: int) -> Iterator[Sequence[Document]]:
    for start in range(0, len(documents), size):
        yield documents[start : start + size]


def _embed_inline(generation_id: int, progress: bool) -> int:
    """Embed until the evaluation generation has nothing pending; how many were embedded
    (the sweep takes pending listings of every generation, public ones too)."""
    remaining = pending_count(generation_id)
    embedded = 0
    with tqdm(total=remaining, desc="embedding", unit="doc", disable=not progress) as bar:
        while remaining:
            batch = embed_pending_batch()
            if not batch:  # nothing claimable (another worker holds them): stop, not spin
                break
            embedded += batch
            now_remaining = pending_count(generation_id)
            bar.update(remaining - now_remaining)
            remaining = now_remaining
    return embedded


def _replace_queries_and_judgments(
    set_name: str, source: Source, collection: JudgedCollection
) -> EvaluationSet:
    with transaction.atomic():
        evaluation_set, _ = EvaluationSet.objects.update_or_create(
            name=set_name,
            defaults={
                "layout": collection.layout,
                "source": source,
                "imported_at": timezone.now(),
                "document_count": len(collection.documents),
                "query_count": len(collection.queries),
                "judgment_count": collection.judged_pairs,
            },
        )
        evaluation_set.queries.all().delete()
        evaluation_set.judgments.all().delete()
        EvaluationQuery.objects.bulk_create(
            EvaluationQuery(evaluation_set=evaluation_set, external_id=query.id, text=query.text)
            for query in collection.queries
        )
        Judgment.objects.bulk_create(
            Judgment(
                evaluation_set=evaluation_set,
                query_id=query_id,
                document_id=document_id,
                relevant=relevant,
            )
            for relevant, judged in ((True, collection.relevant), (False, collection.not_relevant))
            for query_id, document_ids in judged.items()
            for document_id in sorted(document_ids)
        )
    return evaluation_set
