"""The BEIR layout: `corpus.jsonl` (`_id`, `title`, `text`), `queries.jsonl` (`_id`,
`text`) and `qrels/test.tsv` (tab-separated, header `query-id corpus-id score`).

A score above 0 is relevant; 0 or below is an explicit judgment of not relevant. Ids are
kept as written (BEIR ids are strings: `01` and `1` are different documents). A record
without a title has an empty one; other keys (BEIR's `metadata`) are ignored.
"""

import json
from collections.abc import Iterator
from pathlib import Path

from evaluation.collections import (
    CollectionError,
    Document,
    JudgedCollection,
    Judgment,
    Query,
    assemble,
    numbered_lines,
    read_query_ids,
    unique_by_id,
)

QRELS_HEADER = ["query-id", "corpus-id", "score"]


def read_beir(
    path: Path,
    *,
    queries: Path | None = None,
    qrels: Path | None = None,
    qids: Path | None = None,
) -> JudgedCollection:
    """The collection in folder `path`; `queries`, `qrels` and `qids` replace its query
    file, its judgments and (there is no default) restrict the queries to those listed."""
    corpus_file = path / "corpus.jsonl"
    queries_file = queries or path / "queries.jsonl"
    documents = (
        Document(
            id=_id(record, source),
            title=_text(record, "title", source, default=""),
            text=_text(record, "text", source),
        )
        for record, source in _records(corpus_file)
    )
    return assemble(
        "beir",
        unique_by_id(documents, source=corpus_file),
        unique_by_id(
            (
                Query(id=_id(record, source), text=_text(record, "text", source))
                for record, source in _records(queries_file)
            ),
            source=queries_file,
        ),
        _judgments(qrels or path / "qrels" / "test.tsv"),
        qids=None if qids is None else read_query_ids(qids, lambda written, _source: written),
        qids_source=qids,
    )


def _records(path: Path) -> Iterator[tuple[dict[str, object], str]]:
    for number, line in numbered_lines(path):
        if not line.strip():
            continue
        source = f"{path}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise CollectionError(f"{source}: not JSON ({error.msg})") from None
        if not isinstance(record, dict):
            raise CollectionError(f"{source}: expected a JSON object")
        yield record, source


def _id(record: dict[str, object], source: str) -> str:
    # Some BEIR exports write numeric ids as JSON numbers; the id is the same text.
    value = record.get("_id")
    if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
        raise CollectionError(f"{source}: expected an `_id` string, read {value!r}")
    return str(value)


def _text(record: dict[str, object], key: str, source: str, default: str | None = None) -> str:
    value = record.get(key, default)
    if not isinstance(value, str):
        raise CollectionError(f"{source}: expected a `{key}` string, read {value!r}")
    return value


def _judgments(path: Path) -> Iterator[Judgment]:
    lines = numbered_lines(path)
    header = next(lines, (1, ""))[1]
    if [column.strip() for column in header.split("\t")] != QRELS_HEADER:
        raise CollectionError(f"{path}:1: expected the header {' '.join(QRELS_HEADER)!r}")
    for number, line in lines:
        if not line.strip():
            continue
        source = f"{path}:{number}"
        columns = [column.strip() for column in line.split("\t")]
        if len(columns) != len(QRELS_HEADER) or not all(columns):
            raise CollectionError(f"{source}: expected 3 tab-separated columns: {line!r}")
        try:
            score = int(columns[2])
        except ValueError:
            raise CollectionError(f"{source}: expected an integer score: {line!r}") from None
        yield Judgment(columns[0], columns[1], score > 0, source)
