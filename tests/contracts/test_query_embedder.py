"""The QueryEmbedder contract (retrieval/protocols.py), run against the fake that hybrid.py's
tests use (tests/retrieval_fakes.py) and against the model (retrieval/query/embedder.py,
all-MiniLM-L6-v2 through ONNX Runtime):

- an embedding is a float32 unit vector of the model's dimensions, what the vector index's
  generations are built with (a zero vector has no cosine distance to anything);
- the same text embeds the same, and another text differently.
"""

import numpy as np
import numpy.typing as npt
import pytest

from ingestion.embedding import DIMENSIONS
from retrieval.protocols import QueryEmbedder
from retrieval.query.embedder import OnnxQueryEmbedder
from tests.retrieval_fakes import TextSeededEmbedder


async def embed(embedder: QueryEmbedder, text: str) -> npt.NDArray[np.float32]:
    """Every call of the seam goes through here: the one line its signature touches."""
    return await embedder.embed(text)


@pytest.fixture(params=["fake", "onnx"])
def embedder(request: pytest.FixtureRequest) -> QueryEmbedder:
    return TextSeededEmbedder() if request.param == "fake" else OnnxQueryEmbedder()


class TestQueryEmbedder:
    async def test_an_embedding_is_a_float32_unit_vector_of_the_models_dimensions(
        self, embedder: QueryEmbedder
    ) -> None:
        vector = await embed(embedder, "jazz night by the river")
        assert vector.shape == (DIMENSIONS,)
        assert vector.dtype == np.float32
        assert float(np.linalg.norm(vector)) == pytest.approx(1.0, abs=1e-5)

    async def test_the_same_text_embeds_the_same_and_another_text_differently(
        self, embedder: QueryEmbedder
    ) -> None:
        first = await embed(embedder, "pottery workshop")
        assert np.array_equal(await embed(embedder, "pottery workshop"), first)
        assert not np.allclose(await embed(embedder, "organ recital"), first)
