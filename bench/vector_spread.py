"""How the bench's synthetic vectors spread, against real listings' (issue 36): the local
intrinsic dimension of each set, the maximum-likelihood estimate from each point's 20
nearest neighbours (Levina and Bickel), the median over 200 points. The higher it is, the
harder a graph search's job (Aumüller and Ceccarello, "The role of local dimensionality
measures in benchmarking nearest neighbor search"), so a bench whose vectors spread in
more dimensions than real ones understates HNSW's recall.

Real: every distinct Open House London listing in ../shared/data, embedded. Synthetic:
blends of the first 2,000 of them (bench/search_data.py), as built now and with the fixed
weight and noise the bench had before (0.7 and 0.3, 0.01 in each dimension).

    .venv/bin/python bench/vector_spread.py
"""

import os
import sys
from collections.abc import Callable
from pathlib import Path

import django
import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import REPO, SHARED_DATA
from listings import real_records

NEIGHBOURS = 20
POINTS = 200
Vectors = npt.NDArray[np.float32]


def intrinsic_dimension(data: Vectors, rng: np.random.Generator) -> float:
    """The median over POINTS of the data's points of the MLE of their local dimension,
    from their cosine distances to their NEIGHBOURS nearest (themselves left out)."""
    estimates = []
    for index in rng.choice(len(data), POINTS, replace=False):
        distances = np.sort(1 - data @ data[index])[1 : NEIGHBOURS + 1]
        distances = np.maximum(distances, 1e-9)  # a listing of the same text: distance 0
        estimates.append(-1 / np.mean(np.log(distances[:-1] / distances[-1])))
    return float(np.median(estimates))


def main() -> None:
    if not SHARED_DATA.exists():
        sys.exit(f"needs the real listings in {SHARED_DATA}")
    sys.path.insert(0, str(REPO))  # no database: Django's settings for the embedder only
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "searchsite.settings")
    django.setup()
    from search_data import BASE, NOISE, WEIGHTS, blend

    from ingestion.embedding import DIMENSIONS, get_embedder
    from ingestion.text import embedding_text

    texts = list(
        dict.fromkeys(
            embedding_text(str(r["title"]), str(r["venue"]), [], str(r["description"])[:300])
            for r in real_records(SHARED_DATA)
        )
    )
    real = np.asarray(get_embedder().embed_documents(texts), dtype=np.float32)
    base = real[:BASE]
    rng = np.random.default_rng(1)

    def blends(count: int, weight: Callable[[], float], noise: float) -> Vectors:
        pairs = rng.integers(0, len(base), (count, 2))
        return np.asarray(
            [blend(base[a], base[b], weight(), rng.normal(0, noise, DIMENSIONS)) for a, b in pairs],
            dtype=np.float32,
        )

    print(f"real listings          {len(real):>9,}  {intrinsic_dimension(real, rng):5.1f}")
    for count in (len(real), 100_000, 300_000):
        now = blends(count, lambda: rng.uniform(*WEIGHTS), NOISE)
        before = blends(count, lambda: 0.7, 0.01)
        print(
            f"bench's blends, now    {count:>9,}  {intrinsic_dimension(now, rng):5.1f}\n"
            f"bench's blends, before {count:>9,}  {intrinsic_dimension(before, rng):5.1f}"
        )


if __name__ == "__main__":
    main()
