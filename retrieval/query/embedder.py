"""The query embedding stage: ONNX Runtime in a worker thread (it releases the GIL), so
the event loop keeps serving while a query is embedded. A query embedded before is
answered from the embedder's cache on the loop: the hop to a thread and back was 0.2 ms
of a search that needed no encoding.

Queries are embedded at most one per usable core at once, each on one intra-op thread
(ingestion/embedding/embedder.py): more at once would only share the cores and finish all
of them later. The rest wait their turn in order, and one whose caller gave up meanwhile
(its budget ran out, the client left) is never encoded: cancelling the waiting task
cancels its pending future. An encoding already running is left to finish; it is a few
milliseconds of CPU and touches no database."""

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import numpy.typing as npt

from ingestion.embedding import get_embedder
from resilience.per_process import PerProcess

_executor = PerProcess(
    lambda: ThreadPoolExecutor(len(os.sched_getaffinity(0)), thread_name_prefix="query-embed")
)


def query_executor() -> ThreadPoolExecutor:
    """This process's pool; a forked child (a Celery warming worker) makes its own, as the
    parent's threads did not come with it."""
    return _executor.get()


class OnnxQueryEmbedder:
    async def embed(self, text: str) -> npt.NDArray[np.float32]:
        embedder = get_embedder()
        cached = embedder.cached_query(text)
        if cached is not None:
            return cached
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(query_executor(), embedder.embed_query, text)
