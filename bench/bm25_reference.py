"""Plain BM25 on the judged collections' dev queries: the figures the lexical search stage
(retrieval/pg/lexical.py) can be held against. Not a test: it prints figures.

The tokens are Postgres's own, so only the ranking differs from the lexical stage's:
a document is the lexemes of its listing's `search_vector`, each as often as it has
positions, weights ignored (one bag of words over title, venue, aliases and description);
a query is the lexemes of `to_tsvector('english', text)` with their counts. bm25s scores
them by Lucene's formula (Anserini's), at Anserini's defaults (k1=0.9, b=0.4) and at
Robertson's (k1=1.2, b=0.75). Each query scores the whole collection (its audience's
active listings); the ten best listings that share a term with it are kept, ties by
document id ascending, and scored by `evaluation.metrics.score_paths` as
`manage.py evaluate` scores them.

Queries: `evaluation.runs.assess`'s rule. Every query the set holds (import_collection
keeps the dev split only, where the collection has one) whose judgments name at least one
relevant document; `score_paths` leaves out the rest.

Against a database holding the sets (SEARCHSITE_RUN_DIR naming its run dir):

    .venv/bin/python bench/bm25_reference.py [--collections cranfield,cisi,cacm]
"""

import argparse
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "searchsite.settings")

import django

django.setup()

import bm25s  # type: ignore[import-untyped]  # noqa: E402  # ships no type hints
import numpy as np  # noqa: E402
from django.db import connection  # noqa: E402

from evaluation.metrics import MRR_AT_10, NDCG_AT_10, Run, recall_at, score_paths  # noqa: E402
from evaluation.models import EvaluationSet  # noqa: E402
from evaluation.runs import _as_documents, _documents_of  # noqa: E402
from ingestion.models import Listing  # noqa: E402
from ingestion.models.listings import SEARCH_CONFIG  # noqa: E402

K = 10
SETTINGS = {"anserini k1=0.9 b=0.4": (0.9, 0.4), "robertson k1=1.2 b=0.75": (1.2, 0.75)}
# The unnested lexemes with their position counts: the term frequencies Postgres indexed.
# LEFT JOIN so that a listing with an empty vector still counts in N and the mean length.
CORPUS_SQL = f"""
    SELECT l.id, u.lexeme, cardinality(u.positions)
    FROM {Listing._meta.db_table} l LEFT JOIN LATERAL unnest(l.search_vector) u ON true
    WHERE l.audience = %s AND l.status = %s ORDER BY l.id"""
QUERY_SQL = (
    "SELECT u.lexeme, cardinality(u.positions) FROM unnest(to_tsvector(%s::regconfig, %s)) u"
)


def bag(rows: Sequence[tuple[str | None, int | None]]) -> list[str]:
    return [lexeme for lexeme, count in rows if lexeme is not None for _ in range(count or 0)]


def corpus(audience: str) -> dict[int, list[str]]:
    """Listing id -> its tokens, for the audience's active listings."""
    rows: dict[int, list[tuple[str | None, int | None]]] = {}
    with connection.cursor() as cursor:
        cursor.execute(CORPUS_SQL, [audience, Listing.Status.ACTIVE])
        for listing, lexeme, count in cursor.fetchall():
            rows.setdefault(listing, []).append((lexeme, count))
    return {listing: bag(lexemes) for listing, lexemes in rows.items()}


def query_tokens(text: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(QUERY_SQL, [SEARCH_CONFIG, text])
        return bag(cursor.fetchall())


def top(model: bm25s.BM25, tokens: list[str], tie_keys: Sequence[tuple[int, str]]) -> list[int]:
    """Indexes of the K best-scoring documents that share a term with the query. One
    that shares none has no evidence for it (Lucene never returns it), and letting
    document ids order such zeros would make up hits for short queries."""
    known = [token for token in tokens if token in model.vocab_dict]
    if not known:  # bm25s cannot score an empty query
        return []
    scores = model.get_scores(known)
    # Lucene's idf is positive for every term, so a score above 0 means a shared term.
    matched = np.flatnonzero(scores > 0).tolist()
    return sorted(matched, key=lambda i: (-scores[i], tie_keys[i]))[:K]


def reference(evaluation_set: EvaluationSet) -> tuple[int, dict[str, dict[str, float]]]:
    """The number of queries scored, and each setting's mean figures."""
    queries = dict(evaluation_set.queries.values_list("external_id", "text"))
    relevant = {q: docs for q, docs in evaluation_set.relevant_documents().items() if q in queries}
    documents_of = _documents_of(evaluation_set)
    tokens_of = corpus(evaluation_set.source.audience)
    listings = list(tokens_of)
    # A listing's smallest document id (ids written as unpadded numbers here, so length then
    # text is numeric order); a merged listing stands for all its documents, as in assess.
    tie_keys = [min((len(d), d) for d in documents_of.get(listing, [""])) for listing in listings]
    asked = {qid: query_tokens(text) for qid, text in queries.items()}
    runs: dict[str, Run] = {}
    for label, (k1, b) in SETTINGS.items():
        model = bm25s.BM25(k1=k1, b=b, method="lucene", dtype="float64")
        model.index([tokens_of[listing] for listing in listings], show_progress=False)
        rankings = {
            qid: [listings[i] for i in top(model, tokens, tie_keys)]
            for qid, tokens in asked.items()
        }
        runs[label] = _as_documents(rankings, documents_of)
    scores = score_paths(relevant, runs, recall_k=K)
    scored = len(next(iter(scores.values())).per_query)
    return scored, {label: scores[label].means for label in SETTINGS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collections", default="cranfield,cisi,cacm", help="comma-separated")
    args = parser.parse_args()
    # The site's logging passes DEBUG through, and bm25s logs each index it builds.
    logging.getLogger("bm25s").setLevel(logging.INFO)
    started = time.perf_counter()
    columns = (NDCG_AT_10, recall_at(K), MRR_AT_10)
    print(
        f"{'collection':<10}  {'bm25':<24}  {'queries':>7}  "
        + "  ".join(f"{c:>9}" for c in columns)
    )
    for name in args.collections.split(","):
        scored, figures = reference(EvaluationSet.objects.select_related("source").get(name=name))
        for label, means in figures.items():
            cells = "  ".join(f"{means[c]:>9.4f}" for c in columns)
            print(f"{name:<10}  {label:<24}  {scored:>7}  {cells}", flush=True)
    print(f"bm25s {bm25s.__version__}, {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
