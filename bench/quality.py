"""Which settings of the search paths rank best on judged dev queries: the evidence behind
the retrieval defaults (docs/quality.md). Not a test: it prints figures.

Each factor is varied alone from the current defaults, over the evaluation sets named
(imported with `manage.py import_collection`, dev queries only), through the real paths
(`evaluation.runs.assess`, nothing kept):

- the fusion constant (reciprocal rank fusion's k) and the lexical stage's weight in it;
- the candidates each stage contributes per result;
- the vector stage's `hnsw.ef_search`;
- the any-term tier's ts_rank weights (labels D, C, B, A) and length normalisation.

Run against a database that holds the sets, e.g. the one `make run` uses:

    SEARCHSITE_RUN_DIR=.run .venv/bin/python bench/quality.py --collections cranfield,cisi,cacm
"""

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path

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
def any_term_ranking(weights: str, normalisation: int) -> Iterator[None]:
    """The lexical statements rebuilt with other ts_rank settings; the prepared ones (made
    from the defaults) set aside so the new text is what runs."""

    def statements(of: Shape = DEFAULT_SHAPE) -> dict[str, str]:
        return pg_lexical.statements(weights, normalisation, of)

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
    """The single factors that helped, applied together (each label lists what changes
    from the defaults)."""
    paths = (LEXICAL, VECTOR, HYBRID)
    for normalisation in (0, 1):
        for ef in (40, 80):
            for per_result in (3, 5):
                for lexical, vector in ((1, 1), (2, 3)):
                    label = (
                        f"norm={normalisation} ef={ef} per_result={per_result}"
                        f" weights={lexical}:{vector}"
                    )
                    yield (
                        label,
                        paths,
                        together(
                            any_term_ranking(pg_lexical.ANY_TERM_WEIGHTS, normalisation),
                            patched(settings, "SEARCH_HNSW_EF_SEARCH", ef),
                            patched(hybrid, "CANDIDATES_PER_RESULT", per_result),
                            patched(
                                hybrid, "FUSION_WEIGHTS", {"lexical": lexical, "vector": vector}
                            ),
                        ),
                    )


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
    for weights, normalisation in (
        ("{0.1,0.2,0.4,1.0}", 0),
        ("{0.1,0.2,0.4,1.0}", 1),
        ("{0.1,0.4,0.4,1.0}", 0),
        ("{0.1,0.4,0.4,1.0}", 1),
        ("{0.1,0.6,0.6,1.0}", 1),
        ("{0.1,1.0,1.0,1.0}", 1),
    ):
        yield (
            f"any-term weights={weights} normalisation={normalisation}",
            (LEXICAL, HYBRID),
            any_term_ranking(weights, normalisation),
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collections", default="cranfield", help="comma-separated sets")
    parser.add_argument("--only", help="run only the variations whose label contains this")
    parser.add_argument(
        "--combined", action="store_true", help="the helpful factors together, not one by one"
    )
    args = parser.parse_args()
    sets = [EvaluationSet.objects.get(name=name) for name in args.collections.split(",")]
    for label, paths, setting in combinations() if args.combined else variations():
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
