"""Readers from a folder of files to a `JudgedCollection`, one module per format."""

from pathlib import Path

from evaluation.collections import CollectionError, JudgedCollection
from evaluation.formats.beir import read_beir
from evaluation.formats.smart import EXPECTED_FILES, read_smart, smart_flavour

__all__ = ["read_beir", "read_collection", "read_smart"]


def read_collection(
    path: Path,
    *,
    queries: Path | None = None,
    qrels: Path | None = None,
    qids: Path | None = None,
) -> JudgedCollection:
    """The collection in folder `path`, in whichever layout its files show. `queries` and
    `qrels` replace its query and judgment files (same format as the folder's); `qids`, a
    file of query ids one per line, restricts queries and judgments to those listed (for
    SMART folders, in place of the folder's development split)."""
    if (path / "corpus.jsonl").is_file():
        return read_beir(path, queries=queries, qrels=qrels, qids=qids)
    if smart_flavour(path) is not None:
        return read_smart(path, queries=queries, qrels=qrels, qids=qids)
    expected = ", ".join(["corpus.jsonl (BEIR)", *EXPECTED_FILES])
    raise CollectionError(f"{path}: not a judged collection: expected one of {expected}")
