"""A judged collection: documents, queries, and which documents answer which query.

Every reader in `evaluation.formats` ends in `assemble`, so the rules on bad input live
here, once:

- a missing file, a malformed line, a duplicated document or query id, a pair judged
  both relevant and not relevant, no documents or no queries at all, or a query-id file
  naming a query the collection does not have is a `CollectionError` that names the file
  (and line): the files do not mean what we think they mean, and no count read from them
  could be trusted;
- a judgment naming a document or query the collection does not have is skipped and
  counted in `JudgedCollection.skipped`, never dropped silently: a judgments file often
  covers more queries than a chosen query file, and published judgments sometimes name
  documents their corpus lacks. Whoever imports the collection reports the counts;
- judgments of queries left out on purpose (by a query-id restriction) are neither kept
  nor counted as skipped;
- repeated identical judgments collapse into one pair: pairs are sets.
"""

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TypeVar


class CollectionError(ValueError):
    """The files do not make a judged collection; the message says which file and why."""


@dataclass(frozen=True, slots=True)
class Document:
    id: str
    title: str
    text: str


@dataclass(frozen=True, slots=True)
class Query:
    id: str
    text: str


@dataclass(frozen=True, slots=True)
class Judgment:
    """One judged (query, document) pair as read, with where it was read for errors."""

    query_id: str
    document_id: str
    relevant: bool
    source: str


@dataclass(frozen=True, slots=True)
class Skipped:
    """Judgments left out because they name what the collection does not have."""

    unknown_documents: int = 0
    unknown_queries: int = 0


@dataclass(frozen=True)
class JudgedCollection:
    """Documents and queries in file order. `relevant` and `not_relevant` (read-only) map a
    query id to document ids; only queries with at least one judgment of that kind appear.
    `not_relevant` holds explicit non-relevance judgments only (Cranfield's -1, a BEIR
    score <= 0): unjudged is not "not relevant"."""

    layout: str
    documents: tuple[Document, ...]
    queries: tuple[Query, ...]
    relevant: Mapping[str, frozenset[str]]
    not_relevant: Mapping[str, frozenset[str]]
    skipped: Skipped

    @property
    def judged_pairs(self) -> int:
        return sum(map(len, self.relevant.values())) + sum(map(len, self.not_relevant.values()))


Item = TypeVar("Item", Document, Query)


def unique_by_id(items: Iterable[Item], *, source: Path) -> dict[str, Item]:
    """`items` by id, in file order; an id read twice is an error, not a silent overwrite."""
    by_id: dict[str, Item] = {}
    for item in items:
        if item.id in by_id:
            raise CollectionError(f"{source}: id {item.id!r} appears twice")
        by_id[item.id] = item
    return by_id


def read_query_ids(path: Path, normalise: Callable[[str, str], str]) -> list[str]:
    """A file of query ids, one per line (blank lines ignored); `normalise` gets each id
    as written and where it was read."""
    return [
        normalise(line.strip(), f"{path}:{number}")
        for number, line in numbered_lines(path)
        if line.strip()
    ]


def numbered_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, line) of a UTF-8 text file, whatever its line endings (Cranfield's
    are CRLF); read as it goes, since a corpus can be large."""
    try:
        with path.open(encoding="utf-8", newline=None) as lines:
            for number, line in enumerate(lines, 1):
                yield number, line.rstrip("\n")
    except FileNotFoundError:
        raise CollectionError(f"{path}: file not found") from None
    except UnicodeDecodeError as error:
        raise CollectionError(f"{path}: not UTF-8 text ({error.reason})") from None


def assemble(
    layout: str,
    documents: Mapping[str, Document],
    queries: Mapping[str, Query],
    judgments: Iterable[Judgment],
    *,
    qids: Sequence[str] | None,
    qids_source: Path | None,
) -> JudgedCollection:
    """The collection, restricted to the queries `qids` names when given."""
    if not documents:
        raise CollectionError(f"no documents read for a {layout} collection")
    kept = queries
    if qids is not None:
        unknown = [qid for qid in qids if qid not in queries]
        if unknown:
            raise CollectionError(f"{qids_source}: no such queries: {', '.join(unknown[:10])}")
        chosen = set(qids)
        kept = {qid: query for qid, query in queries.items() if qid in chosen}
    if not kept:
        raise CollectionError(f"no queries read for a {layout} collection")
    pairs: dict[tuple[str, str], Judgment] = {}
    unknown_documents = unknown_queries = 0
    for judgment in judgments:
        if judgment.query_id not in queries:
            unknown_queries += 1
        elif judgment.query_id not in kept:
            continue  # left out on purpose by `qids`
        elif judgment.document_id not in documents:
            unknown_documents += 1
        else:
            key = (judgment.query_id, judgment.document_id)
            earlier = pairs.setdefault(key, judgment)
            if earlier.relevant != judgment.relevant:
                raise CollectionError(
                    f"{judgment.source}: query {key[0]!r} document {key[1]!r} judged both"
                    f" relevant and not relevant (first at {earlier.source})"
                )
    return JudgedCollection(
        layout=layout,
        documents=tuple(documents.values()),
        queries=tuple(kept.values()),
        relevant=_by_query(judgment for judgment in pairs.values() if judgment.relevant),
        not_relevant=_by_query(judgment for judgment in pairs.values() if not judgment.relevant),
        skipped=Skipped(unknown_documents=unknown_documents, unknown_queries=unknown_queries),
    )


def _by_query(judgments: Iterable[Judgment]) -> Mapping[str, frozenset[str]]:
    grouped: dict[str, set[str]] = {}
    for judgment in judgments:
        grouped.setdefault(judgment.query_id, set()).add(judgment.document_id)
    return MappingProxyType({qid: frozenset(ids) for qid, ids in grouped.items()})
