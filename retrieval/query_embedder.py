"""The query embedding stage: ONNX Runtime in a worker thread (it releases the GIL), so
the event loop keeps serving while a query is embedded. Abandoning it on a timeout is
harmless: it is a few milliseconds of CPU, and it touches no database."""

import asyncio

import numpy as np
import numpy.typing as npt

from ingestion.embedding import get_embedder


class OnnxQueryEmbedder:
    async def embed(self, text: str) -> npt.NDArray[np.float32]:
        return await asyncio.to_thread(get_embedder().embed_query, text)
