"""Sentence embeddings (all-MiniLM-L6-v2, 384 dims, unit length) for ingestion and retrieval.

Runtimes: "onnx" (default; exported once per weights into EMBEDDER_CACHE_DIR) and "torch"
(the sentence-transformers fp32 reference). EMBEDDER_RUNTIME picks one for get_embedder().
"""

from ingestion.embedding.embedder import Embedder, get_embedder
from ingestion.embedding.model import DIMENSIONS, MODEL_NAME

__all__ = ["DIMENSIONS", "MODEL_NAME", "Embedder", "get_embedder"]
