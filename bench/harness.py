"""Shared start-up for benchmarks: embedded services in a scratch directory (or the
servers named by DATABASE_URL / REDIS_URL), Django configured, schema migrated, static
assets collected."""

import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:  # imported at run time once start() has put the repository on the path
    from searchsite.embedded import EmbeddedServices

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
T = TypeVar("T")


def rounds(blocks: list[T]) -> Iterator[tuple[T, bool]]:
    """(block, keep) in the order the benchmarks run them: each block runs through all its
    queries before the next starts. Round 0 warms buffers and pools; rounds 1 and 2 are
    kept, in opposite block orders so that a drift of the machine's speed weighs on every
    block alike."""
    for number in range(3):
        for block in blocks[::-1] if number == 2 else blocks:
            yield block, number > 0


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def paired_interval(pairs: int, ratio: Callable[[Sequence[int]], float]) -> tuple[float, float]:
    """The 95 % interval of `ratio` (of the pairs at the indexes given) over 2,000
    resamplings of the pairs; the seed fixed, so one sitting's figures read the same twice."""
    import numpy as np

    rng = np.random.default_rng(5)
    drawn = [ratio(rng.integers(0, pairs, pairs).tolist()) for _ in range(2000)]
    low, high = np.percentile(drawn, [2.5, 97.5])
    return float(low), float(high)


def start(base: Path | None = None) -> "EmbeddedServices":
    """Returns the embedded services handle; call .stop() on it when done. `base` keeps
    the services' data between runs (a scratch directory otherwise)."""
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "searchsite.settings")
    base = base or Path(tempfile.mkdtemp(prefix="searchsite-bench-"))
    os.environ["SEARCHSITE_RUN_DIR"] = str(base)
    from searchsite import embedded

    services = embedded.ensure_running(base)
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    # The pages name their assets by the manifest this writes (the search page's too).
    call_command("collectstatic", interactive=False, verbosity=0)
    return services


@contextmanager
def running(base: Path | None = None) -> Iterator[None]:
    """`start`, and at the end Django's connections closed and the services stopped."""
    services = start(base)
    try:
        yield
    finally:
        from django.db import connections

        connections.close_all()
        services.stop()
