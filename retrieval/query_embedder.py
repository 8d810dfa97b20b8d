"""The query embedding stage: ONNX Runtime in a worker thread (it releases the GIL), so
the event loop keeps serving while a query is embedded. Abandoning it on a timeout is
harmless: it is a few milliseconds of CPU, and it touches no database. A query embedded
before is answered from the embedder's cache on the loop: the hop to a thread and back
was 0.2 ms of a search that needed no encoding."""

import asyncio

import numpy as np
import numpy.typing as npt

from ingestion.embedding import get_embedder


class OnnxQueryEmbedder:
    async def embed(self, text: str) -> npt.NDArray[np.float32]:
        embedder = get_embedder()
        cached = embedder.cached_query(text)
        if cached is not None:
            return cached
        return await asyncio.to_thread(embedder.embed_query, text)
