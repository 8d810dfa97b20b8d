"""Which settings of the search paths rank best on judged dev queries: the evidence behind
the retrieval defaults (docs/quality.md). Not a test: it prints figures.

Each factor is varied alone from the current defaults, over the evaluation sets named
(imported with `manage.py import_collection`, dev queries only), through the real paths
(`evaluation.runs.assess`, nothing kept):

- the fusion constant (reciprocal rank fusion's k) and the lexical stage's weight in it;
- the candidates each stage contributes per result;
- the vector stage's `hnsw.ef_search`;
- with `--lexical`, the lexical stage's BM25 (k1 and b over a grid), the fields' weights,
  and whether full matches come before partial ones (lexical path only).

Run against a database that holds the sets, e.g. the one `make run` uses:

    SEARCHSITE_RUN_DIR=.run .venv/bin/python bench/quality.py --collections cranfield,cisi,cacm
    SEARCHSITE_RUN_DIR=.run .venv/bin/python bench/quality.py --lexical --collections ...
"""

import argparse
import dataclasses
import os
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "searchsite.settings")

import django

django.setup()

from django.conf import settings  # noqa: E402

from evaluation.models import EvaluationSet  # noqa: E402
from evaluation.paths import HYBRID, LEXICAL, VECTOR  # noqa: E402
from evaluation.runs import assess  # noqa: E402
from retrieval import hybrid  # noqa: E402
from retrieval.pg import lexical as pg_lexical  # noqa: E402
from retrieval.query.filters import DEFAULT_SHAPE, Shape  # noqa: E402


@contextmanager
def patched(owner: object, name: str, value: object) -> Iterator[None]:
    before = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, before)


@contextmanager
def lexical_ranking(**changes: Any) -> Iterator[None]:
    """The lexical statements rebuilt with other BM25 settings; the prepared ones (made
    from the defaults) set aside so the new text is what runs."""
    ranking = dataclasses.replace(pg_lexical.RANKING, **changes)

    def statements(of: Shape = DEFAULT_SHAPE) -> dict[str, str]:
        return pg_lexical.statements(ranking, of)

    unprepared = dict.fromkeys(pg_lexical._PREPARED, ("unprepared", ""))
    with (
        patched(pg_lexical, "_statements", statements),
        patched(pg_lexical, "_PREPARED", unprepared),
    ):
        yield


@contextmanager
def together(*settings: AbstractContextManager[None]) -> Iterator[None]:
    with ExitStack() as stack:
        for setting in settings:
            stack.enter_context(setting)
        yield


def combinations() -> Iterator[tuple[str, tuple[str, ...], AbstractContextManager[None]]]:
    """The fusion factors that helped, applied together (each label lists what changes
    from the defaults)."""
    for k in (10, 20, 60):
        for per_result in (3, 5, 10):
            for lexical, vector in ((1, 1), (2, 3), (3, 2)):
                label = f"fusion k={k} per_result={per_result} weights={lexical}:{vector}"
                yield (
                    label,
                    (HYBRID,),
                    together(
                        patched(hybrid, "FUSION_K", k),
                        patched(hybrid, "CANDIDATES_PER_RESULT", per_result),
                        patched(hybrid, "FUSION_WEIGHTS", {"lexical": lexical, "vector": vector}),
                    ),
                )


def lexical_variations() -> Iterator[tuple[str, tuple[str, ...], AbstractContextManager[None]]]:
    """BM25's k1 and b over a grid, then the fields' weights and the tiers at the
    defaults' k1 and b."""
    for k1 in (0.6, 0.9, 1.2, 1.5, 2.0):
        for b in (0.2, 0.3, 0.4, 0.5, 0.6, 0.75):
            yield f"bm25 k1={k1} b={b}", (LEXICAL,), lexical_ranking(k1=k1, b=b)
    # ts_rank_cd takes weights up to 1: a heavier title is lighter other fields.
    for title, venue, description in ((1.0, 1.0, 1.0), (1.0, 0.6, 0.6), (1.0, 0.2, 0.2)):
        yield (
            f"fields title={title} venue={venue} description={description}",
            (LEXICAL,),
            lexical_ranking(title=title, venue=venue, description=description),
        )
    yield "full matches first", (LEXICAL,), lexical_ranking(every_term_first=True)


def variations() -> Iterator[tuple[str, tuple[str, ...], AbstractContextManager[None]]]:
    """(label, paths it moves, the setting applied)."""
    fused = (HYBRID,)
    for k in (5, 10, 20, 40, 60, 100, 200):
        yield f"fusion k={k}", fused, patched(hybrid, "FUSION_K", k)
    for lexical, vector in ((1, 1), (2, 1), (3, 2), (1, 2), (2, 3)):
        label = f"fusion weights lexical:vector={lexical}:{vector}"
        stages = {"lexical": lexical, "vector": vector}
        yield label, fused, patched(hybrid, "FUSION_WEIGHTS", stages)
    for per_result in (1, 2, 3, 5, 10):
        yield (
            f"candidates per result={per_result}",
            fused,
            patched(hybrid, "CANDIDATES_PER_RESULT", per_result),
        )
    for ef in (10, 20, 40, 80, 160):
        yield (
            f"hnsw.ef_search={ef}",
            (VECTOR, HYBRID),
            patched(settings, "SEARCH_HNSW_EF_SEARCH", ef),
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collections", default="cranfield", help="comma-separated sets")
    parser.add_argument("--only", help="run only the variations whose label contains this")
    parser.add_argument(
        "--combined", action="store_true", help="the helpful factors together, not one by one"
    )
    parser.add_argument("--lexical", action="store_true", help="the lexical stage's ranking")
    args = parser.parse_args()
    sets = [EvaluationSet.objects.get(name=name) for name in args.collections.split(",")]
    chosen = combinations if args.combined else variations
    for label, paths, setting in (lexical_variations if args.lexical else chosen)():
        if args.only and args.only not in label:
            continue
        with setting:
            cells = []
            for evaluation_set in sets:
                report = assess(evaluation_set, paths=paths)
                figures = "  ".join(
                    f"{path} {report.paths[path]['recall@10']:.3f}"
                    f"/{report.paths[path]['ndcg@10']:.3f}"
                    for path in paths
                )
                cells.append(f"{evaluation_set.name}: {figures}")
        print(f"{label:<48} " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
