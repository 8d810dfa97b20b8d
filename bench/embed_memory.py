"""The batch session's memory and CPU over many batches of mixed shapes, with onnxruntime's
memory patterns as configured (off) or turned back on, each in a process of its own.

    .venv/bin/python bench/embed_memory.py [--batches 1600] [--runs 2]

Each run embeds the same batches (1-8 texts of 2-90 words, seeded) through
`Embedder.embed_documents` and prints the process's RSS after each eighth of them and
the CPU seconds the batches took. The runs alternate: patterns off, on, off, on...
"""

import argparse
import random
import subprocess
import sys
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
MARKS = 8


def batches(count: int) -> list[list[str]]:
    rng = random.Random(7)
    words = [f"w{number}" for number in range(5000)]
    return [
        [" ".join(rng.choices(words, k=rng.randint(2, 90))) for _ in range(rng.randint(1, 8))]
        for _ in range(count)
    ]


def measure(count: int, patterns: bool) -> None:
    sys.path.insert(0, str(REPO))
    import onnxruntime as ort

    from ingestion.embedding import Embedder

    if patterns:
        made = ort.InferenceSession

        def with_patterns(path: str, options: ort.SessionOptions, **kwargs: object) -> object:
            options.enable_mem_pattern = True
            return made(path, options, **kwargs)

        ort.InferenceSession = with_patterns
    embedder = Embedder.load("onnx")
    process = psutil.Process()
    work = batches(count)
    every = max(1, count // MARKS)
    rss = []
    cpu = time.process_time()
    for number, batch in enumerate(work, 1):
        embedder.embed_documents(batch)
        if number % every == 0:
            rss.append(f"{process.memory_info().rss / 2**20:.1f}")
    label = "on " if patterns else "off"
    print(f"patterns {label}  rss MB {' '.join(rss)}  cpu {time.process_time() - cpu:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=1600)
    parser.add_argument("--runs", type=int, default=2, help="of each")
    parser.add_argument("--patterns", choices=["on", "off"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.patterns:
        measure(args.batches, args.patterns == "on")
        return
    for _ in range(args.runs):
        for patterns in ("off", "on"):
            argv = [sys.executable, __file__, "--batches", str(args.batches)]
            subprocess.run([*argv, "--patterns", patterns], check=True)


if __name__ == "__main__":
    main()
