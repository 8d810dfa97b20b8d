"""In-process hybrid search of two checkouts, alternated block by block in one sitting.

    .venv/bin/python bench/side_by_side.py --before DIR [--after DIR] --data-dir DIR
        [--before-data-dir DIR] [--blocks 30] [--queries 200] [--path hybrid|public]

Each checkout runs in a worker process of its own, importing only its own code, and both
search the same queries with the same precomputed embeddings (as bench/search.py's (a)).
The workers take turns: one runs a block (every query once), then the other, in the
order ABBA BAAB..., so that a drift of this shared machine's speed falls on both sides
alike. Whole runs of bench/search.py, minutes apart, differ by up to 70 % on this machine
for the same tree (docs/benchmarks.md); blocks a second apart do not.

Prints each side's p50/p95/p99 over all kept searches, and the after/before ratios of
p50 and p99 with a 95 % interval from resampling the pairs of blocks.

The database must have been built by bench/search.py --data-dir. By default both sides
search it (the earlier checkout's code then reads the later schema, which holds while a
change only adds to it); --before-data-dir gives the earlier one a database of its own,
migrated by its own code. Make the earlier checkout with `git worktree add DIR COMMIT`.
"""

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

BENCH = Path(__file__).resolve().parent


def worker(tree: Path, data_dir: Path, path: str) -> None:
    """Serve blocks over stdin/stdout: a line of queries and embeddings in, a line of
    timings out. Imports come from `tree` only."""
    # The interpreter put this file's folder first on the path; `tree`'s own must win.
    sys.path[:] = [str(tree / "bench"), *(p for p in sys.path if p != str(BENCH))]
    import dataclasses
    import time

    import numpy as np
    from harness import start  # the tree's own: its settings, its migrations
    from search import FixedEmbedder

    # Answers go to a stream of their own: whatever the tree's code prints goes to stderr.
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    start(data_dir)
    print(json.dumps({"ready": True}), file=answers, flush=True)
    from retrieval.bounds.breaker_gate import NeverOpen
    from retrieval.bounds.deadline import SearchDeadline
    from retrieval.hybrid import hybrid_search
    from retrieval.query.parse import parse_query
    from retrieval.search import search
    from retrieval.service import budget_policy, dependencies
    from retrieval.types import NoAnswerError

    async def serve() -> None:
        policy = budget_policy()
        deps = None
        for line in sys.stdin:
            request = json.loads(line)
            if deps is None:
                table = {q: np.asarray(v, np.float32) for q, v in request["embeddings"].items()}
                deps = dataclasses.replace(dependencies(), embedder=FixedEmbedder(table))
            # The first block reads the index into memory: every vector stage must run,
            # whatever the breaker thinks of the misses a cold start gives.
            block_deps = (
                dataclasses.replace(deps, breaker=NeverOpen()) if "embeddings" in request else deps
            )
            timings: list[float] = []
            lexical: list[float] = []
            modes: dict[str, int] = {}
            for q in request["queries"]:
                started = time.perf_counter()
                if path == "hybrid":
                    deadline = SearchDeadline.planned(policy)
                    outcome = await hybrid_search(parse_query(q, "10"), deadline, block_deps)
                else:  # the public search: the model, hydration, counts, metrics
                    try:
                        shown = await search(parse_query(q, "10"), SearchDeadline.planned(policy))
                    except NoAnswerError:  # a cold start's first searches: warming goes on
                        modes["no answer"] = modes.get("no answer", 0) + 1
                        continue
                    outcome = shown.outcome
                timings.append((time.perf_counter() - started) * 1000)
                lexical.append(outcome.timings.lexical_ms or 0.0)
                modes[outcome.mode.value] = modes.get(outcome.mode.value, 0) + 1
            answer = {"ms": timings, "lexical": lexical, "modes": modes}
            print(json.dumps(answer), file=answers, flush=True)

    import uvloop  # the web server's loop (searchsite.supervisor.web_argv)

    uvloop.run(serve())


class Side:
    """A worker process and every figure it has returned."""

    def __init__(self, name: str, tree: Path, data_dir: Path, path: str) -> None:
        self.name = name
        self.process = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--worker",
                str(tree),
                "--data-dir",
                str(data_dir),
                "--path",
                path,
            ],
            cwd=tree,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.blocks: list[list[float]] = []
        self.lexical: list[float] = []
        self.modes: dict[str, int] = {}
        # Started one at a time: two workers' set-up on one data directory races (both
        # collect the static files into it).
        self._answer()

    def _answer(self) -> dict[str, Any]:
        stdout: IO[str] = self.process.stdout  # type: ignore[assignment]
        line = stdout.readline()
        if not line:
            raise SystemExit(f"the {self.name} worker ended (exit {self.process.wait()})")
        return dict(json.loads(line))

    def run(self, request: Mapping[str, object], keep: bool) -> dict[str, int]:
        """Runs a block; returns its answers' modes."""
        stdin: IO[str] = self.process.stdin  # type: ignore[assignment]
        stdin.write(json.dumps(request) + "\n")
        stdin.flush()
        answer = self._answer()
        if keep:
            self.blocks.append(answer["ms"])
            self.lexical.extend(answer["lexical"])
            for mode, count in answer["modes"].items():
                self.modes[mode] = self.modes.get(mode, 0) + count
        return dict(answer["modes"])

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        self.process.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--before", type=Path, help="the earlier commit's checkout")
    parser.add_argument("--after", type=Path, default=BENCH.parent)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--before-data-dir", type=Path)
    parser.add_argument("--blocks", type=int, default=30, help="kept blocks a side")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--path",
        choices=("hybrid", "public"),
        default="hybrid",
        help="hybrid_search with fixed query embeddings (bench/search.py's (a)), or the "
        "public search: the query embedded, the listings hydrated, the counts on the filters",
    )
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.data_dir, args.path)
        return
    if args.before is None:
        parser.error("--before is required")
    compare(args)


def compare(args: argparse.Namespace) -> None:
    from harness import REPO, SHARED_DATA
    from listings import records
    from search import queries

    sys.path.insert(0, str(REPO))
    from ingestion.embedding import get_embedder
    from searchsite import embedded

    # Each database's services are held for the whole sitting (a worker that started them
    # would stop them when it ends), and each worker finds its own by its data directory.
    services = []
    for data_dir in dict.fromkeys([args.data_dir, args.before_data_dir or args.data_dir]):
        for name in ("DATABASE_URL", "REDIS_URL"):
            os.environ.pop(name, None)
        services.append(embedded.ensure_running(data_dir))
    for name in ("DATABASE_URL", "REDIS_URL"):
        os.environ.pop(name, None)
    try:
        qs = queries(args.queries, records(2000, SHARED_DATA if SHARED_DATA.exists() else None))
        embedder = get_embedder()
        # The embeddings go once, with the warming block.
        table = {q: embedder.embed_query(q).tolist() for q in set(qs)}
        first, request = {"queries": qs, "embeddings": table}, {"queries": qs}
        before = Side("before", args.before, args.before_data_dir or args.data_dir, args.path)
        after = Side("after", args.after, args.data_dir, args.path)
        try:
            warm(before, after, first, request)
            for block in range(args.blocks):
                order = (before, after) if block % 4 in (0, 3) else (after, before)
                for side in order:
                    side.run(request, keep=True)
                print(f"block {block + 1}/{args.blocks}", file=sys.stderr, flush=True)
        finally:
            before.close()
            after.close()
    finally:
        for handle in services:
            handle.stop()
    report(before, after)


def warm(
    before: Side, after: Side, first: Mapping[str, object], request: Mapping[str, object]
) -> None:
    """Blocks kept by neither side until both answer every query in full. Right after
    Postgres starts, the HNSW index is read from disk: vector stages miss their budget
    and the breaker opens for a while. Figures taken then would time fallbacks."""
    before.run(first, keep=False)
    after.run(first, keep=False)
    modes: list[dict[str, int]] = []
    for _ in range(20):
        modes = [before.run(request, keep=False), after.run(request, keep=False)]
        if all(set(m) == {"hybrid"} for m in modes):
            return
    raise SystemExit(f"not every search answered in full after warming: {modes}")


def report(before: Side, after: Side) -> None:
    from harness import paired_interval, percentile

    def pooled(blocks: list[list[float]], share: float) -> float:
        return float(percentile([m for b in blocks for m in b], share))

    for side in (before, after):
        every = [m for b in side.blocks for m in b]
        print(
            f"{side.name:6}  hybrid p50 {pooled(side.blocks, 0.5):6.2f}  "
            f"p95 {pooled(side.blocks, 0.95):6.2f}  p99 {pooled(side.blocks, 0.99):6.2f} ms  "
            f"lexical stage p99 {percentile(side.lexical, 0.99):6.2f} ms  "
            f"({len(every)} searches, modes {side.modes})"
        )
    for share in (0.5, 0.99):

        def ratio(picks: Sequence[int], share: float = share) -> float:
            return pooled([after.blocks[i] for i in picks], share) / pooled(
                [before.blocks[i] for i in picks], share
            )

        low, high = paired_interval(len(before.blocks), ratio)
        whole = ratio(range(len(before.blocks)))
        print(f"after/before p{share * 100:.0f}: {whole:.3f}  (95 % interval {low:.3f}-{high:.3f})")


if __name__ == "__main__":
    main()
