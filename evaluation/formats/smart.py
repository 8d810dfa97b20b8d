"""The SMART-format collections: Cranfield, CISI and CACM, told apart by their files.

What each flavour's files mean, from their SOURCE.txt:

- ids are numbers, written with or without zero padding (CACM's judgments say `01`,
  its queries `.I 1`): every id is read as the number it writes, so `01` is `1`;
- Cranfield's query `.I` numbers run 001..365 with gaps, but its judgments number the
  queries by their position in `cran.qry` (1..225): a query's id is its position;
- Cranfield's judgment codes 1..4 are relevant and -1 is not; the two published readings
  of 1..4 disagree on which end is best, so relevance is binary. Any other code is an
  error. CISI's and CACM's judgments list relevant pairs only (`qid docid 0 0`);
- a document's title is `.T`, its text `.W` (authors, citations, keywords left out);
  CACM has no `.W` for half its records (and no `.T` for record 3193), and Cranfield's
  records 471 and 995 are empty: all are kept, as the published counts include them;
- Cranfield's abstracts open by repeating the title; the repeat is dropped from the text
  so that a title word does not count twice when title and text are indexed together. A
  repeat is recognised with whitespace ignored (record 1000 writes "3 .5" and "3. 5");
  one with a changed word (record 1369, "oseen's"/"oseens's") is left in;
- a query's text is its `.W`, after its `.T` where it has one (CISI's queries 58..112
  are papers, asked for by title and abstract);
- the judged queries are the development split, `dev_qids.txt` or `splits/dev_qids.txt`,
  when the folder has one: the held-out queries stay out of sight unless asked for.
"""

from collections.abc import Iterator
from dataclasses import dataclass
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
from evaluation.formats.tagged import TaggedRecord, read_tagged

CRANFIELD_RELEVANT_CODES = frozenset({1, 2, 3, 4})
CRANFIELD_NOT_RELEVANT_CODE = -1
SPLIT_FILES = ("dev_qids.txt", "splits/dev_qids.txt")


@dataclass(frozen=True)
class Flavour:
    layout: str
    documents: str  # the file whose presence says which flavour a folder holds
    queries: str
    judgments: tuple[str, ...]  # the first of these present is read
    graded: bool  # Cranfield's three-column codes, else listed-means-relevant
    queries_numbered_by_position: bool


FLAVOURS = (
    Flavour(
        layout="cranfield",
        documents="cran.all.1400",
        queries="cran.qry",
        judgments=("dev_cranqrel", "cranqrel"),
        graded=True,
        queries_numbered_by_position=True,
    ),
    Flavour(
        layout="cisi",
        documents="CISI.ALL",
        queries="CISI.QRY",
        judgments=("CISI.REL",),
        graded=False,
        queries_numbered_by_position=False,
    ),
    Flavour(
        layout="cacm",
        documents="cacm.all",
        queries="query.text",
        judgments=("qrels.text",),
        graded=False,
        queries_numbered_by_position=False,
    ),
)


# What a folder must hold to be read as each flavour, for errors that say so.
EXPECTED_FILES = tuple(f"{flavour.documents} ({flavour.layout})" for flavour in FLAVOURS)


def smart_flavour(path: Path) -> Flavour | None:
    return next((f for f in FLAVOURS if (path / f.documents).is_file()), None)


def read_smart(
    path: Path,
    *,
    queries: Path | None = None,
    qrels: Path | None = None,
    qids: Path | None = None,
) -> JudgedCollection:
    """The collection in folder `path`; `queries`, `qrels` and `qids` replace the folder's
    own query, judgment and query-id files."""
    flavour = smart_flavour(path)
    if flavour is None:
        expected = ", ".join(EXPECTED_FILES)
        raise CollectionError(f"{path}: no SMART collection here: expected one of {expected}")
    documents_file = path / flavour.documents
    queries_file = queries or path / flavour.queries
    judgments_file = qrels or _first_present(path, flavour.judgments)
    qids_file = qids or next((path / n for n in SPLIT_FILES if (path / n).is_file()), None)
    return assemble(
        flavour.layout,
        unique_by_id(map(_document, read_tagged(documents_file)), source=documents_file),
        unique_by_id(_queries(queries_file, flavour), source=queries_file),
        _judgments(judgments_file, graded=flavour.graded),
        qids=None if qids_file is None else read_query_ids(qids_file, _numeric_id),
        qids_source=qids_file,
    )


def _first_present(path: Path, names: tuple[str, ...]) -> Path:
    for name in names:
        if (path / name).is_file():
            return path / name
    raise CollectionError(f"{path}: no judgments file: expected {' or '.join(names)}")


def _document(record: TaggedRecord) -> Document:
    title = record.lines("T")
    return Document(
        id=_numeric_id(record.id, record.source),
        title=_flat(title),
        text=_flat(_without_repeated_title(title, record.lines("W"))),
    )


def _queries(path: Path, flavour: Flavour) -> Iterator[Query]:
    for position, record in enumerate(read_tagged(path), 1):
        written = _numeric_id(record.id, record.source)
        yield Query(
            id=str(position) if flavour.queries_numbered_by_position else written,
            text=_flat(record.lines("T") + record.lines("W")),
        )


def _judgments(path: Path, *, graded: bool) -> Iterator[Judgment]:
    for number, line in numbered_lines(path):
        columns = line.split()
        if not columns:
            continue
        source = f"{path}:{number}"
        if len(columns) != (3 if graded else 4):
            raise CollectionError(f"{source}: expected {3 if graded else 4} columns: {line!r}")
        relevant = _relevant_code(columns[2], source) if graded else True
        yield Judgment(
            _numeric_id(columns[0], source), _numeric_id(columns[1], source), relevant, source
        )


def _relevant_code(code: str, source: str) -> bool:
    try:
        value = int(code)
    except ValueError:
        raise CollectionError(f"{source}: expected a relevance code, read {code!r}") from None
    if value in CRANFIELD_RELEVANT_CODES:
        return True
    if value == CRANFIELD_NOT_RELEVANT_CODE:
        return False
    raise CollectionError(f"{source}: unknown relevance code {code!r}")


def _numeric_id(written: str, source: str) -> str:
    if not written.isascii() or not written.isdigit():
        raise CollectionError(f"{source}: expected a numeric id, read {written!r}")
    return str(int(written))


def _without_repeated_title(title: list[str], abstract: list[str]) -> list[str]:
    """`abstract` without its first lines when, whitespace ignored, they are `title`."""
    wanted = "".join("".join(title).split())
    if not wanted:
        return abstract
    seen = ""
    for count, line in enumerate(abstract, 1):
        seen += "".join(line.split())
        if not wanted.startswith(seen):
            break
        if seen == wanted:
            return abstract[count:]
    return abstract


def _flat(lines: list[str]) -> str:
    return " ".join(" ".join(lines).split())
