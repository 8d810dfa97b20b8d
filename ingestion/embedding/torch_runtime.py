"""The fp32 reference runtime: the packaged model through sentence-transformers itself."""

import os
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ingestion.embedding.model import model_dir

# OpenMP's default busy-wait collapses when other processes hold the cores: with one busy
# neighbour on the 2-core box a query took 225-700 ms instead of 10-30 ms with passive waits.
# libgomp reads this when torch is first imported, which this package defers to first use.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


class TorchEncoder:
    def __init__(self) -> None:
        from sentence_transformers import SentenceTransformer

        self._model = SentenceTransformer(str(model_dir()), device="cpu", local_files_only=True)

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        embeddings = self._model.encode(
            list(texts),
            batch_size=max(len(texts), 1),
            convert_to_numpy=True,
            # Already the model's last module; asked again so the unit-norm contract does not
            # hinge on modules.json.
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return np.asarray(embeddings, dtype=np.float32)
