"""The default runtime: the exported transformer in onnxruntime, pooled as sentence-transformers."""

import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnxruntime as ort

from ingestion.embedding.export import INPUT_NAMES, OUTPUT_NAME
from ingestion.embedding.model import load_tokenizer


class OnnxEncoder:
    """One onnxruntime session with `threads` intra-op threads, made at once when `eager`,
    else on first use (a web process never embeds a batch)."""

    def __init__(
        self, model_path: Path, threads: int, spin: bool = False, *, eager: bool = True
    ) -> None:
        self._model_path = model_path
        self.threads = threads
        self._spin = spin
        self._tokenizer = load_tokenizer()
        self._session_lock = threading.Lock()
        self._session: ort.InferenceSession | None = self._load() if eager else None

    def _loaded(self) -> ort.InferenceSession:
        if self._session is None:
            with self._session_lock:
                if self._session is None:
                    self._session = self._load()
        return self._session

    def _load(self) -> ort.InferenceSession:
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        # Spin-waiting shaves ~0.7 ms off a query on an idle box, but the 2 cores are shared
        # (web, Celery, Postgres): with one other busy process, 2 spinning threads took 9-18 ms
        # per query against ~4 ms with blocking waits.
        options.add_session_config_entry(
            "session.intra_op.allow_spinning", "1" if self._spin else "0"
        )
        # A BERT forward pass is a chain of ops: running branches in parallel gains nothing and
        # would only compete with the intra-op threads for the same cores.
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        # A memory pattern is planned and kept for each input shape a session sees, and
        # batches come in as many shapes as (rows, longest text). Without them the batch
        # session's process used 374 MB instead of 420 after 1,600 batches of mixed shapes,
        # and 7 % less CPU (docs/benchmarks.md, "Memory patterns").
        options.enable_mem_pattern = False
        return ort.InferenceSession(
            str(self._model_path), options, providers=["CPUExecutionProvider"]
        )

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        encodings = self._tokenizer.encode_batch(list(texts))
        input_ids = np.array([e.ids for e in encodings], dtype=np.int64)
        attention_mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = dict(zip(INPUT_NAMES, (input_ids, attention_mask), strict=True))
        (token_embeddings,) = self._loaded().run([OUTPUT_NAME], feeds)
        return mean_pool_normalised(np.asarray(token_embeddings, dtype=np.float32), attention_mask)


def mean_pool_normalised(
    token_embeddings: npt.NDArray[np.float32], attention_mask: npt.NDArray[np.int64]
) -> npt.NDArray[np.float32]:
    # Same arithmetic as sentence-transformers' Pooling(mean) + Normalize, including its
    # clamps, so padding tokens never contribute and an empty row cannot divide by zero.
    mask = attention_mask[..., np.newaxis].astype(np.float32)
    summed = (token_embeddings * mask).sum(axis=1)
    pooled = summed / np.clip(mask.sum(axis=1), 1e-9, None)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    normalised: npt.NDArray[np.float32] = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
    return normalised
