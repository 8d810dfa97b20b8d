"""The sentence embedder shared by ingestion (document batches) and retrieval (single queries)."""

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from ingestion.embedding.export import ensure_onnx_model
from ingestion.embedding.model import DIMENSIONS, MODEL_NAME
from ingestion.embedding.onnx_runtime import OnnxEncoder
from ingestion.embedding.torch_runtime import TorchEncoder
from resilience.per_process import PerProcess

FloatArray = npt.NDArray[np.float32]
RUNTIMES = ("onnx", "torch")
QUERY_THREADS = 1  # intra-op threads of the onnx query session (see Embedder.load)
_REPO_DIR = Path(__file__).resolve().parents[2]


class Encoder(Protocol):
    def encode(self, texts: Sequence[str]) -> FloatArray:
        """Unit-length float32 embeddings, one row per text, for a single batch."""
        ...


class Embedder:
    model_name: str = MODEL_NAME
    dimensions: int = DIMENSIONS

    def __init__(
        self,
        encoder: Encoder,
        runtime: str,
        query_cache_size: int = 4096,
        *,
        query_encoder: Encoder | None = None,
    ) -> None:
        self.runtime = runtime
        self._encoder = encoder
        self._query_encoder = query_encoder or encoder
        # Searches repeat (suggestions, paging, popular terms); a bounded cache keeps the hot
        # ones free without growing with every distinct query a process ever sees.
        self._queries: OrderedDict[str, FloatArray] = OrderedDict()
        self._queries_size = query_cache_size
        self._queries_lock = threading.Lock()

    @classmethod
    def load(
        cls,
        runtime: str = "onnx",
        *,
        cache_dir: Path | None = None,
        threads: int | None = None,
        spin: bool = False,
        query_cache_size: int = 4096,
    ) -> "Embedder":
        """Build an embedder; cache_dir, threads and spin only concern the onnx runtime."""
        if runtime == "onnx":
            model_path = ensure_onnx_model(cache_dir or default_cache_dir())
            # Queries get a session of their own on one intra-op thread: a web process embeds
            # many single queries at once, side by side on the cores
            # (retrieval/query/embedder.py), and two threads each oversubscribed them: with
            # one, the capacity limit of bench/capacity.py doubled
            # (docs/decisions/embedder-threads-one-per-query-a-core-left-beside-a-batch.md).
            # A batch has one pass at a time to spread over the cores. The query session is
            # made now, as a first query must not pay for it; the batch session on the first
            # batch, which a web process never has.
            return cls(
                OnnxEncoder(model_path, threads or default_threads(), spin, eager=False),
                runtime,
                query_cache_size,
                query_encoder=OnnxEncoder(model_path, QUERY_THREADS, spin),
            )
        if runtime == "torch":
            return cls(TorchEncoder(), runtime, query_cache_size)
        raise ValueError(f"unknown embedder runtime {runtime!r}; expected one of {RUNTIMES}")

    def embed_query(self, text: str) -> FloatArray:
        """Shape (dimensions,); read-only because the same array is handed to every caller."""
        vector = self.cached_query(text)
        if vector is None:
            vector = self._encode_query(text)
            with self._queries_lock:
                self._queries[text] = vector
                if len(self._queries) > self._queries_size:
                    self._queries.popitem(last=False)
        return vector

    def cached_query(self, text: str) -> FloatArray | None:
        """The query's embedding if it is cached, without encoding anything: an event loop
        can ask without sending the query to a thread."""
        with self._queries_lock:
            vector = self._queries.get(text)
            if vector is not None:
                self._queries.move_to_end(text)
            return vector

    def embed_documents(self, texts: Sequence[str], batch_size: int = 8) -> FloatArray:
        """Shape (len(texts), dimensions), rows in the order of texts.

        Batches of 8, not 32: on this CPU a batch of 8 already keeps the model's matrix
        products efficient, and a smaller batch spans a narrower range of lengths, so it
        pads less. The worker's claims of 128 then cost no more than one call over all the
        texts (28.2 CPU-s for 1,024 either way, against 31.3 and 36.0 in batches of 32;
        docs/benchmarks.md)."""
        if isinstance(texts, str):
            raise TypeError("embed_documents takes a sequence of texts, not a single string")
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        # Each batch is padded to its longest text: grouping similar lengths wastes less work
        # on padding tokens than batching in arrival order.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        embeddings = np.empty((len(texts), self.dimensions), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            embeddings[rows] = self._encoder.encode([texts[i] for i in rows])
        return embeddings

    def _encode_query(self, text: str) -> FloatArray:
        vector: FloatArray = self._query_encoder.encode([text])[0]
        vector.flags.writeable = False
        return vector


def default_cache_dir() -> Path:
    configured = os.environ.get("EMBEDDER_CACHE_DIR")
    if configured:
        return Path(configured)
    # Deliberately not SEARCHSITE_RUN_DIR: test sessions point that at a fresh temporary
    # directory, and the export depends only on the weights, so they share the repo's cache.
    return _REPO_DIR / ".run" / "models"


def default_threads() -> int:
    configured = os.environ.get("EMBEDDER_THREADS", "").strip()
    if configured:
        if not configured.isdigit() or int(configured) < 1:
            raise ValueError(f"EMBEDDER_THREADS must be a positive integer, got {configured!r}")
        return int(configured)
    # Of batches (queries have their own session), which leave one core to what runs beside
    # them: Postgres storing the vectors, the polls, and searches. On the 2-core target two
    # threads embed a batch faster alone, but they spend more CPU a listing: with one, the
    # pipeline kept the model busy (end to end 0.93-0.96 of raw, against 0.79-0.82), and
    # with a feed at the same rate fewer searches fell back
    # (docs/decisions/embedder-threads-one-per-query-a-core-left-beside-a-batch.md).
    # Past three cores, more threads than two were never measured. Where several processes
    # embed at once on the same cores (Celery concurrency > 1), set 1.
    return max(1, min(2, len(os.sched_getaffinity(0)) - 1))


# A prefork child (Celery) inherits the parent's embedder, but not the threads behind its
# onnxruntime or torch thread pools: it loads its own.
_embedder = PerProcess(lambda: Embedder.load(os.environ.get("EMBEDDER_RUNTIME") or "onnx"))


def get_embedder() -> Embedder:
    """The process-wide embedder, loaded on first use with the runtime in EMBEDDER_RUNTIME."""
    return _embedder.get()
