"""Judged-collection readers: hand-made files in each layout (our own text, shaped like
the real files, quirks included), then the real collections' published counts."""

from collections.abc import Callable
from pathlib import Path

import pytest

from evaluation.collections import CollectionError, JudgedCollection
from evaluation.formats import read_beir, read_collection, read_smart
from tests.conftest import SHARED_DATA


def write(folder: Path, name: str, text: str, *, crlf: bool = False) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.replace("\n", "\r\n" if crlf else "\n").encode())
    return path


def relevant(collection: JudgedCollection) -> dict[str, set[str]]:
    return {qid: set(ids) for qid, ids in collection.relevant.items()}


def not_relevant(collection: JudgedCollection) -> dict[str, set[str]]:
    return {qid: set(ids) for qid, ids in collection.not_relevant.items()}


# Cranfield, as the real files are: CRLF; every abstract opens with its title; an empty
# record; a record with two .W fields; query .I numbers with gaps; a qrels file whose
# lines end in a blank and whose last line has no newline.
CRAN_DOCUMENTS = """\
.I 1
.T
tidal flow past
a quay wall .
.A
marsh,p.
.B
harbour q. 3, 1951, 12.
.W
tidal flow past
a quay wall .
  the flow was measured at six stations along the wall .
.I 2
.T
.A
.B
.W
.I 3
.T
gust loads on kites .
.A
.B
.W
gust  loads on
kites .
the first part of the abstract .
.W
a second part, printed apart .
"""
CRAN_QUERIES = """\
.I 001
.W
how does tide flow along a wall .
.I 004
.W
what loads do gusts put on kites .
.I 009
.W
are there empty papers .
"""
CRAN_DEV_QRELS = "1 1 2 \n2 3 1 \n2 1 -1 \n3 2 4 \n3 3 -1"


def cranfield(
    folder: Path, *, qrels: str = CRAN_DEV_QRELS, dev_qids: str | None = "2\n3\n"
) -> Path:
    write(folder, "cran.all.1400", CRAN_DOCUMENTS, crlf=True)
    write(folder, "cran.qry", CRAN_QUERIES, crlf=True)
    write(folder, "dev_cranqrel", qrels)
    if dev_qids is not None:
        write(folder, "dev_qids.txt", dev_qids)
    return folder


def test_it_numbers_cranfield_queries_by_position_as_its_judgments_do(tmp_path: Path) -> None:
    collection = read_collection(cranfield(tmp_path))

    assert collection.layout == "cranfield"
    # Restricted to dev_qids.txt (2, 3): the queries written .I 004 and .I 009.
    assert [(query.id, query.text) for query in collection.queries] == [
        ("2", "what loads do gusts put on kites ."),
        ("3", "are there empty papers ."),
    ]
    assert relevant(collection) == {"2": {"3"}, "3": {"2"}}
    assert not_relevant(collection) == {"2": {"1"}, "3": {"3"}}
    assert collection.judged_pairs == 4


def test_it_reads_crlf_records_without_the_repeated_title(tmp_path: Path) -> None:
    documents = {d.id: d for d in read_collection(cranfield(tmp_path)).documents}

    assert documents["1"].title == "tidal flow past a quay wall ."
    assert documents["1"].text == "the flow was measured at six stations along the wall ."
    # The repeat is found with whitespace ignored, and both .W parts are kept, in order.
    assert documents["3"].text == (
        "the first part of the abstract . a second part, printed apart ."
    )
    assert (documents["2"].title, documents["2"].text) == ("", "")
    assert len(documents) == 3


def test_it_keeps_an_abstract_that_only_starts_like_its_title(tmp_path: Path) -> None:
    documents = CRAN_DOCUMENTS.replace("gust  loads on\nkites .", "gust loads on kite frames .")
    write(cranfield(tmp_path), "cran.all.1400", documents, crlf=True)

    text = {d.id: d.text for d in read_collection(tmp_path).documents}["3"]

    assert text.startswith("gust loads on kite frames . the first part")


def test_it_takes_every_query_without_a_development_split(tmp_path: Path) -> None:
    collection = read_collection(cranfield(tmp_path, dev_qids=None))

    assert [query.id for query in collection.queries] == ["1", "2", "3"]
    assert relevant(collection) == {"1": {"1"}, "2": {"3"}, "3": {"2"}}


def test_it_prefers_dev_cranqrel_and_falls_back_to_cranqrel(tmp_path: Path) -> None:
    folder = cranfield(tmp_path, dev_qids=None)
    write(folder, "cranqrel", "1 3 1\n2 2 1\n3 1 1\n")
    assert relevant(read_collection(folder))["1"] == {"1"}

    (folder / "dev_cranqrel").unlink()
    assert relevant(read_collection(folder)) == {"1": {"3"}, "2": {"2"}, "3": {"1"}}


@pytest.mark.parametrize("code", ["5", "0", "x"])
def test_it_refuses_a_cranfield_code_it_cannot_read(tmp_path: Path, code: str) -> None:
    folder = cranfield(tmp_path, qrels=f"1 1 2\n2 3 {code}\n")

    with pytest.raises(CollectionError, match=r"dev_cranqrel:2: .*relevance code"):
        read_collection(folder)


# CISI: tag lines with trailing blanks (\x20), several .A fields, a citation (.X) block with
# tabs, queries of which some are papers with a title, judgments "q d 0 0.000000".
CISI_DOCUMENTS = """\
.I 1
.T\x20
Shelving Maps in a Small Library
.A\x20
Reed, K.
.A
Lowe, T.
.W
   Maps are awkward to shelve; we compare three ways.
.X
1\t1\t1
2\t5\t1
.I 2
.T
Reading Rooms at Night
.A
Grey, B.
.W
Opening hours and who uses them.
.X
2\t2\t2
"""
CISI_QUERIES = """\
.I 1
.W
How should a small library store its maps?
.I 2
.T
Evening Use of Reading Rooms
.A
Grey, B.
.W
A survey of late opening.
.B
(Library Notes, 1970)
"""
CISI_REL = "     1      1\t0\t0.000000\n     2      2\t0\t0.000000\n     2      1\t0\t0.000000\n"


def cisi(folder: Path) -> Path:
    write(folder, "CISI.ALL", CISI_DOCUMENTS)
    write(folder, "CISI.QRY", CISI_QUERIES)
    write(folder, "CISI.REL", CISI_REL)
    write(folder, "splits/dev_qids.txt", "2\n")
    return folder


def test_it_reads_cisi_with_its_split_and_titled_queries(tmp_path: Path) -> None:
    collection = read_collection(cisi(tmp_path))

    assert collection.layout == "cisi"
    assert [(d.id, d.title, d.text) for d in collection.documents] == [
        (
            "1",
            "Shelving Maps in a Small Library",
            "Maps are awkward to shelve; we compare three ways.",
        ),
        ("2", "Reading Rooms at Night", "Opening hours and who uses them."),
    ]
    assert [(q.id, q.text) for q in collection.queries] == [
        ("2", "Evening Use of Reading Rooms A survey of late opening.")
    ]
    assert relevant(collection) == {"2": {"1", "2"}}
    assert not_relevant(collection) == {}


# CACM: records without .W, keyword and citation fields, zero-padded query ids in the
# judgments, an unterminated last line.
CACM_DOCUMENTS = """\
.I 1
.T
Sorting Tapes Quickly
.B
CACM May, 1960
.A
Hale, R.
.N
CA600501 JB March 22, 1978  8:28 PM
.X
1\t5\t1
.I 2
.T
A Compiler for Small Machines
.W
We describe a compiler
that fits in 4K words.
.K
compilers, small machines
.C
4.12
.B
CACM June, 1961
.N
CA610602 JB March 22, 1978  8:29 PM
"""
CACM_QUERIES = """\
.I 1
.W
 Tape sorting methods.
.N
 1. A. Reader (sorting)

.I 2
.W
 Compilers that fit in small memories
.A
Hale, R.
.N
 2. B. Reader (compilers)
"""


def cacm(folder: Path) -> Path:
    write(folder, "cacm.all", CACM_DOCUMENTS)
    write(folder, "query.text", CACM_QUERIES)
    write(folder, "qrels.text", "01 1  0 0\n02 2  0 0\n02 1  0 0")
    write(folder, "splits/dev_qids.txt", "1\n2\n")
    return folder


def test_it_reads_cacm_with_padded_query_ids_and_missing_abstracts(tmp_path: Path) -> None:
    collection = read_collection(cacm(tmp_path))

    assert collection.layout == "cacm"
    assert [(d.id, d.title, d.text) for d in collection.documents] == [
        ("1", "Sorting Tapes Quickly", ""),
        ("2", "A Compiler for Small Machines", "We describe a compiler that fits in 4K words."),
    ]
    assert [(q.id, q.text) for q in collection.queries] == [
        ("1", "Tape sorting methods."),
        ("2", "Compilers that fit in small memories"),
    ]
    assert relevant(collection) == {"1": {"1"}, "2": {"1", "2"}}


def test_qids_replace_the_development_split(tmp_path: Path) -> None:
    qids = write(tmp_path, "mine.txt", "1\n\n")

    collection = read_collection(cisi(tmp_path / "cisi"), qids=qids)

    assert [q.id for q in collection.queries] == ["1"]
    assert relevant(collection) == {"1": {"1"}}
    assert collection.skipped.unknown_queries == 0  # left out on purpose, not skipped


def test_queries_and_qrels_overrides_read_other_files(tmp_path: Path) -> None:
    folder = cacm(tmp_path / "cacm")
    queries = write(tmp_path, "second.text", ".I 1\n.W\n Another sorting question.\n")
    qrels = write(tmp_path, "second.qrels", "01 2 0 0\n")
    qids = write(tmp_path, "qids.txt", "1\n")

    collection = read_smart(folder, queries=queries, qrels=qrels, qids=qids)

    assert [(q.id, q.text) for q in collection.queries] == [("1", "Another sorting question.")]
    assert relevant(collection) == {"1": {"2"}}


def beir(folder: Path) -> Path:
    write(
        folder,
        "corpus.jsonl",
        '{"_id": "d1", "title": "Canal walks", "text": "Towpaths in spring."}\n'
        "\n"
        '{"_id": "d2", "text": "No title here.", "metadata": {"url": "x"}}\n'
        '{"_id": 3, "title": "", "text": "A numeric id."}\n',
    )
    write(
        folder,
        "queries.jsonl",
        '{"_id": "q1", "text": "walks by water"}\n{"_id": "q2", "text": "untitled"}\n'
        '{"_id": "q3", "text": "never judged"}\n',
    )
    write(
        folder,
        "qrels/test.tsv",
        "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t0\nq2\t3\t1\nq2\td1\t1\nq2\td1\t1\n",
    )
    return folder


def test_it_reads_beir_with_scores_above_zero_relevant(tmp_path: Path) -> None:
    collection = read_collection(beir(tmp_path))

    assert collection.layout == "beir"
    assert [(d.id, d.title, d.text) for d in collection.documents] == [
        ("d1", "Canal walks", "Towpaths in spring."),
        ("d2", "", "No title here."),
        ("3", "", "A numeric id."),
    ]
    assert [q.id for q in collection.queries] == ["q1", "q2", "q3"]
    assert relevant(collection) == {"q1": {"d1"}, "q2": {"3", "d1"}}
    assert not_relevant(collection) == {"q1": {"d2"}}
    assert collection.judged_pairs == 4  # the repeated line is one pair


def test_it_counts_judgments_naming_what_the_collection_lacks(tmp_path: Path) -> None:
    folder = beir(tmp_path / "beir")
    qrels = write(
        tmp_path,
        "other.tsv",
        "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\tgone\t1\nq9\td1\t1\nq2\td2\t1\n",
    )
    qids = write(tmp_path, "qids.txt", "q1\n")

    collection = read_beir(folder, qrels=qrels, qids=qids)

    assert relevant(collection) == {"q1": {"d1"}}
    assert (collection.skipped.unknown_documents, collection.skipped.unknown_queries) == (1, 1)


@pytest.mark.parametrize(
    ("layout", "name", "text", "message"),
    [
        (
            beir,
            "corpus.jsonl",
            '{"_id": "d1", "text": "ok"}\n{"_id": "d1"',
            r"corpus.jsonl:2: not JSON",
        ),
        (
            beir,
            "corpus.jsonl",
            '{"_id": "d1", "text": "a"}\n{"_id": "d1", "text": "b"}\n',
            "'d1' appears twice",
        ),
        (
            beir,
            "corpus.jsonl",
            '{"title": "no id", "text": "a"}\n',
            r"corpus.jsonl:1: expected an `_id`",
        ),
        (beir, "queries.jsonl", '{"_id": "q1"}\n', r"queries.jsonl:1: expected a `text` string"),
        (beir, "qrels/test.tsv", "q1\td1\t1\n", r"test.tsv:1: expected the header"),
        (
            beir,
            "qrels/test.tsv",
            "query-id\tcorpus-id\tscore\nq1 d1 1\n",
            r"test.tsv:2: expected 3",
        ),
        (
            beir,
            "qrels/test.tsv",
            "query-id\tcorpus-id\tscore\nq1\td1\thigh\n",
            r"test.tsv:2: .*integer",
        ),
        (
            beir,
            "qrels/test.tsv",
            "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td1\t0\n",
            r"test.tsv:3: .*both relevant and not relevant \(first at .*test.tsv:2\)",
        ),
        (beir, "corpus.jsonl", "\n", "no documents read for a beir collection"),
        (cacm, "splits/dev_qids.txt", "\n", "no queries read for a cacm collection"),
        (cacm, "cacm.all", "stray words\n.I 1\n.T\nx\n", r"cacm.all:1: text outside any field"),
        (cacm, "cacm.all", ".I 1\nwords before a tag\n", r"cacm.all:2: text outside any field"),
        (cacm, "cacm.all", ".I one\n.T\nx\n", r"cacm.all:1: expected a numeric id"),
        (cacm, "qrels.text", "01 1 0\n", r"qrels.text:1: expected 4 columns"),
        (cacm, "splits/dev_qids.txt", "1\n7\n", r"dev_qids.txt: no such queries: 7"),
    ],
)
def test_it_refuses_malformed_files(
    tmp_path: Path, layout: Callable[[Path], Path], name: str, text: str, message: str
) -> None:
    write(layout(tmp_path), name, text)

    with pytest.raises(CollectionError, match=message):
        read_collection(tmp_path)


def test_it_names_a_missing_file(tmp_path: Path) -> None:
    (cisi(tmp_path) / "CISI.REL").unlink()

    with pytest.raises(CollectionError, match=r"no judgments file: expected CISI.REL"):
        read_collection(tmp_path)
    with pytest.raises(CollectionError, match=r"missing.jsonl: file not found"):
        read_collection(beir(tmp_path / "beir"), queries=tmp_path / "missing.jsonl")


def test_it_names_the_layouts_it_knows_for_an_unknown_folder(tmp_path: Path) -> None:
    write(tmp_path, "README", "not a collection\n")

    with pytest.raises(CollectionError) as raised:
        read_collection(tmp_path)

    for expected in ("corpus.jsonl (BEIR)", "cran.all.1400", "CISI.ALL", "cacm.all"):
        assert expected in str(raised.value)


# The real collections, against the counts verified in each folder's SOURCE.txt.
RETRIEVAL = SHARED_DATA / "retrieval"
shared = pytest.mark.skipif(
    not RETRIEVAL.is_dir(), reason=f"shared retrieval collections not found at {RETRIEVAL}"
)


def every_query(tmp_path: Path, count: int) -> Path:
    return write(tmp_path, "all_qids.txt", "".join(f"{qid}\n" for qid in range(1, count + 1)))


@shared
def test_cranfield_matches_its_published_counts(tmp_path: Path) -> None:
    dev = read_collection(RETRIEVAL / "cranfield")
    everything = read_collection(RETRIEVAL / "cranfield", qids=every_query(tmp_path, 225))

    assert (len(dev.documents), len(everything.queries), len(dev.queries)) == (1400, 225, 142)
    dev_lines = (RETRIEVAL / "cranfield" / "dev_cranqrel").read_text().splitlines()
    assert dev.judged_pairs == len(dev_lines) == 1111
    # Each query has exactly one -1 row and at least one relevant pair.
    assert sorted(map(len, dev.not_relevant.values())) == [1] * 142
    assert set(dev.relevant) == {query.id for query in dev.queries}
    assert dev.skipped.unknown_documents == dev.skipped.unknown_queries == 0


@shared
def test_cisi_matches_its_published_counts(tmp_path: Path) -> None:
    dev = read_collection(RETRIEVAL / "cisi")
    everything = read_collection(RETRIEVAL / "cisi", qids=every_query(tmp_path, 112))

    assert (len(dev.documents), len(everything.queries)) == (1460, 112)
    assert (everything.judged_pairs, len(everything.relevant)) == (3114, 76)
    assert (len(dev.queries), len(dev.relevant)) == (50, 50)


@shared
def test_cacm_matches_its_published_counts(tmp_path: Path) -> None:
    dev = read_collection(RETRIEVAL / "cacm")
    everything = read_collection(RETRIEVAL / "cacm", qids=every_query(tmp_path, 64))

    assert len(dev.documents) == 3204
    assert sum(1 for document in dev.documents if not document.text) == 1617
    assert len(everything.queries) == 64
    assert (everything.judged_pairs, len(everything.relevant)) == (796, 52)
    assert (len(dev.queries), len(dev.relevant)) == (32, 32)
