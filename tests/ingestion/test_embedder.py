"""The embedder: ONNX matches the sentence-transformers reference, and its caches behave."""

import copy
import os
import random
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from ingestion.embedding import DIMENSIONS, MODEL_NAME, Embedder, export, get_embedder
from ingestion.embedding import embedder as embedder_module
from ingestion.embedding.model import model_dir

# fp32 ONNX and fp32 torch agree to ~1e-6. The 0.99 product target is too loose to catch
# subtle tokenisation bugs: truncating LONG_TEXT at 250 tokens instead of 256 scores 0.998.
REFERENCE_COSINE = 0.999

LONG_TEXT = " ".join(
    ["Late-night jazz quartet with a sax solo at the Blue Room."] * 15
    + ["Municipal waste collection changes to a fortnightly schedule next month."] * 40
)
TEXTS = [
    "free jazz concert brooklyn tonight",
    "Pottery Workshop for Beginners. Old Mill Hall, Riverside. All materials provided.",
    "",
    "   padded   with   spaces   ",
    "Café Müller: tanztheater über Erinnerung — 90 min, ¡sin intermedio!",
    "x",
    LONG_TEXT,
]


@pytest.fixture(scope="module")
def onnx_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def onnx_embedder(onnx_cache_dir: Path) -> Embedder:
    return Embedder.load("onnx", cache_dir=onnx_cache_dir)


@pytest.fixture(scope="module")
def torch_embedder() -> Embedder:
    return Embedder.load("torch")


@pytest.fixture(params=["onnx", "torch"])
def any_embedder(request: pytest.FixtureRequest) -> Embedder:
    embedder: Embedder = request.getfixturevalue(f"{request.param}_embedder")
    return embedder


def test_identity(onnx_embedder: Embedder, torch_embedder: Embedder) -> None:
    assert (onnx_embedder.runtime, torch_embedder.runtime) == ("onnx", "torch")
    assert onnx_embedder.model_name == MODEL_NAME == "sentence-transformers/all-MiniLM-L6-v2"
    assert onnx_embedder.dimensions == DIMENSIONS == 384


def test_query_is_a_unit_vector(any_embedder: Embedder) -> None:
    vector = any_embedder.embed_query("outdoor yoga class sunday morning")
    assert vector.shape == (384,)
    assert vector.dtype == np.float32
    assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)


def test_documents_are_unit_vectors(any_embedder: Embedder) -> None:
    vectors = any_embedder.embed_documents(TEXTS)
    assert vectors.shape == (len(TEXTS), 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert any_embedder.embed_documents([]).shape == (0, 384)


def test_onnx_matches_torch_reference(onnx_embedder: Embedder, torch_embedder: Embedder) -> None:
    # LONG_TEXT changes topic at ~210 tokens and runs to ~730 (past BERT's 512 positions): it
    # only agrees if both truncate at 256, not at tokenizer.json's own 128 or not at all.
    reference = torch_embedder.embed_documents(TEXTS)
    batched = onnx_embedder.embed_documents(TEXTS, batch_size=4)
    single = np.stack([onnx_embedder.embed_query(text) for text in TEXTS])
    assert np.sum(batched * reference, axis=1).min() >= REFERENCE_COSINE
    assert np.sum(single * reference, axis=1).min() >= REFERENCE_COSINE


def test_related_texts_are_closer_than_unrelated(onnx_embedder: Embedder) -> None:
    query = onnx_embedder.embed_query("live jazz concert tonight")
    related, unrelated = onnx_embedder.embed_documents(
        [
            "Jazz quartet performing live at the Blue Note, doors 8pm",
            "Quarterly tax filing deadline reminder for small businesses",
        ]
    )
    assert query @ related > query @ unrelated + 0.2


def test_documents_come_back_in_input_order(onnx_embedder: Embedder) -> None:
    texts = [f"{word} " * length for length, word in enumerate(["tango", "chess", "ramen"] * 4, 1)]
    random.Random(7).shuffle(texts)
    batched = onnx_embedder.embed_documents(texts, batch_size=3)
    one_by_one = np.stack([onnx_embedder.embed_query(text) for text in texts])
    np.testing.assert_allclose(batched, one_by_one, atol=1e-5)
    assert (np.argmax(batched @ one_by_one.T, axis=1) == np.arange(len(texts))).all()


def test_cached_query_is_equal_and_read_only(onnx_embedder: Embedder) -> None:
    first = onnx_embedder.embed_query("comedy night downtown friday late")
    again = onnx_embedder.embed_query("comedy night downtown friday late")
    np.testing.assert_array_equal(first, again)
    assert not again.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        again[0] = 0.0


class CountingEncoder:
    """Deterministic fake: the first component carries the text length, so order is visible."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.batches.append(list(texts))
        vectors = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        vectors[:, 0] = [len(text) for text in texts]
        return vectors


def test_documents_are_batched_by_length_and_restored() -> None:
    encoder = CountingEncoder()
    texts = ["a" * n for n in random.Random(3).sample(range(1, 50), 20)]
    vectors = Embedder(encoder, "fake").embed_documents(texts, batch_size=6)
    assert vectors[:, 0].tolist() == [len(text) for text in texts]
    assert [len(batch) for batch in encoder.batches] == [6, 6, 6, 2]
    lengths = [len(text) for batch in encoder.batches for text in batch]
    assert lengths == sorted(lengths)


def test_embed_documents_rejects_a_bare_string() -> None:
    with pytest.raises(TypeError, match="sequence of texts"):
        Embedder(CountingEncoder(), "fake").embed_documents("one text")


def test_query_cache_hits_skip_the_encoder_and_stay_bounded() -> None:
    encoder = CountingEncoder()
    embedder = Embedder(encoder, "fake", query_cache_size=2)
    for text in ["a", "bb", "a", "ccc", "a", "bb"]:
        embedder.embed_query(text)
    # "a" stays hot; "bb" is evicted by "ccc" and has to be encoded again.
    assert [batch[0] for batch in encoder.batches] == ["a", "bb", "ccc", "bb"]


def test_disabled_query_cache_still_returns_read_only_vectors() -> None:
    encoder = CountingEncoder()
    embedder = Embedder(encoder, "fake", query_cache_size=0)
    vector = embedder.embed_query("same")
    embedder.embed_query("same")
    assert len(encoder.batches) == 2
    assert not vector.flags.writeable


def test_unknown_runtime_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown embedder runtime 'tensorflow'"):
        Embedder.load("tensorflow")


@pytest.mark.parametrize(("cores", "threads"), [(1, 1), (2, 1), (3, 2), (8, 2)])
def test_a_batch_leaves_a_core_to_the_rest(
    monkeypatch: pytest.MonkeyPatch, cores: int, threads: int
) -> None:
    monkeypatch.delenv("EMBEDDER_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))
    assert embedder_module.default_threads() == threads


def test_thread_count_comes_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBEDDER_THREADS", "3")
    assert embedder_module.default_threads() == 3
    monkeypatch.setenv("EMBEDDER_THREADS", "0")
    with pytest.raises(ValueError, match="EMBEDDER_THREADS must be a positive integer"):
        embedder_module.default_threads()


def _refuse_export(weights_dir: Path, destination: Path) -> None:
    raise AssertionError("exported again although the cache holds the model")


def test_export_lands_in_the_cache_dir_and_is_reused(
    onnx_embedder: Embedder, onnx_cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (exported,) = onnx_cache_dir.glob("*.onnx")
    assert export.cache_key(model_dir()) in exported.name
    before = exported.stat()
    monkeypatch.setattr(export, "export_onnx", _refuse_export)

    reloaded = Embedder.load("onnx", cache_dir=onnx_cache_dir)

    after = exported.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert list(onnx_cache_dir.glob("*.onnx")) == [exported]
    text = "salsa class riverside saturday evening"
    np.testing.assert_array_equal(reloaded.embed_query(text), onnx_embedder.embed_query(text))


@pytest.fixture
def fake_weights(tmp_path: Path) -> Path:
    weights = tmp_path / "weights"
    weights.mkdir()
    (weights / "config.json").write_text("{}")
    (weights / "model.safetensors").write_bytes(b"weights v1")
    return weights


def test_concurrent_loads_export_once(
    fake_weights: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exports: list[Path] = []

    def slow_export(weights_dir: Path, destination: Path) -> None:
        exports.append(destination)
        destination.write_bytes(b"half")
        time.sleep(0.3)
        destination.write_bytes(b"complete model")

    monkeypatch.setattr(export, "export_onnx", slow_export)
    cache = tmp_path / "cache"
    results: list[bytes] = []

    def load() -> None:
        # Readers must never see the half-written file, even with no lock on the fast path.
        results.append(export.ensure_onnx_model(cache, fake_weights).read_bytes())

    threads = [threading.Thread(target=load) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(exports) == 1
    assert results == [b"complete model"] * 4
    assert [p.suffix for p in cache.iterdir() if p.suffix != ".lock"] == [".onnx"]


def test_failed_export_leaves_no_model_behind(
    fake_weights: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_export(weights_dir: Path, destination: Path) -> None:
        destination.write_bytes(b"half")
        raise RuntimeError("exporter crashed")

    cache = tmp_path / "cache"
    monkeypatch.setattr(export, "export_onnx", broken_export)
    with pytest.raises(RuntimeError, match="exporter crashed"):
        export.ensure_onnx_model(cache, fake_weights)
    assert [p.suffix for p in cache.iterdir()] == [".lock"]


def test_leftovers_of_a_killed_export_are_cleared(
    fake_weights: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(export, "export_onnx", lambda _w, dest: dest.write_bytes(b"model"))
    cache = tmp_path / "cache"
    cache.mkdir()
    name = f"all-MiniLM-L6-v2-{export.cache_key(fake_weights)}.onnx"
    (cache / f".{name}.killed.tmp").write_bytes(b"half")

    model = export.ensure_onnx_model(cache, fake_weights)

    assert sorted(p.name for p in cache.iterdir()) == sorted([name, f"{name}.lock"])
    assert model.read_bytes() == b"model"
    assert model.stat().st_mode & 0o777 == 0o644


def test_cache_key_follows_weights_and_export_version(
    fake_weights: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = export.cache_key(fake_weights)
    monkeypatch.setattr(export, "EXPORT_VERSION", export.EXPORT_VERSION + 1)
    assert export.cache_key(fake_weights) != original
    monkeypatch.undo()
    (fake_weights / "model.safetensors").write_bytes(b"weights v2")
    assert export.cache_key(fake_weights) != original


def test_get_embedder_loads_once_per_process_from_env(
    onnx_embedder: Embedder, onnx_cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMBEDDER_RUNTIME", "onnx")
    monkeypatch.setenv("EMBEDDER_CACHE_DIR", str(onnx_cache_dir))
    monkeypatch.setattr(export, "export_onnx", _refuse_export)
    fresh = copy.copy(embedder_module._embedder)  # the module's own way to make one, unmade
    fresh.forget()
    monkeypatch.setattr(embedder_module, "_embedder", fresh)
    loads: list[str] = []
    real_load = Embedder.load

    def counting_load(runtime: str = "onnx", **kwargs: object) -> Embedder:
        loads.append(runtime)
        return real_load(runtime)

    monkeypatch.setattr(Embedder, "load", counting_load)
    seen: list[Embedder] = []
    threads = [threading.Thread(target=lambda: seen.append(get_embedder())) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert loads == ["onnx"]
    assert len({id(embedder) for embedder in seen}) == 1
    assert seen[0].runtime == "onnx"

    # A forked child must not reuse the parent's session and thread pool.
    parent_pid = os.getpid()
    monkeypatch.setattr(os, "getpid", lambda: parent_pid + 1)
    assert get_embedder() is not seen[0]
    assert loads == ["onnx", "onnx"]


async def test_a_query_embedded_before_is_answered_without_a_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from retrieval.query import embedder

    first = await embedder.OnnxQueryEmbedder().embed("harbour walk at dawn")

    def no_thread() -> None:
        raise AssertionError("a cached query was sent to a thread")

    monkeypatch.setattr(embedder, "query_executor", no_thread)
    assert await embedder.OnnxQueryEmbedder().embed("harbour walk at dawn") is first
    with pytest.raises(AssertionError, match="sent to a thread"):
        await embedder.OnnxQueryEmbedder().embed("a query not seen before")


class HeldEncoder(CountingEncoder):
    """Encodes once `release` is set; `started` counts the encodings begun."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.started = threading.Semaphore(0)

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.started.release()
        assert self.release.wait(10), "never released"
        return super().encode(texts)


async def test_queries_are_embedded_one_per_core_and_a_cancelled_one_never(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import asyncio

    from retrieval.query import embedder

    encoder = HeldEncoder()
    monkeypatch.setattr(embedder, "get_embedder", lambda: Embedder(encoder, "fake"))
    cores = len(os.sched_getaffinity(0))
    embed = embedder.OnnxQueryEmbedder().embed
    running = [asyncio.create_task(embed(f"query {n}")) for n in range(cores)]
    for _ in range(cores):
        assert await asyncio.to_thread(encoder.started.acquire, True, 10)
    # Every core busy: the next query waits, and its caller gives up meanwhile.
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(embed("given up"), 0.05)
    assert not encoder.started.acquire(blocking=False), "more queries than cores at once"
    encoder.release.set()
    await asyncio.gather(*running)
    await embed("after")  # queued behind the given-up one: the pool has passed it by now

    encoded = [text for batch in encoder.batches for text in batch]
    assert sorted(encoded) == sorted([f"query {n}" for n in range(cores)] + ["after"])


@pytest.fixture
def session_options(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The options of every onnxruntime session made during the test, in order."""
    import onnxruntime as ort

    made: list[Any] = []
    real_session = ort.InferenceSession

    def recording_session(path: str, options: ort.SessionOptions, **kwargs: object) -> object:
        made.append(options)
        return real_session(path, options, **kwargs)

    monkeypatch.setattr(ort, "InferenceSession", recording_session)
    return made


def test_onnx_queries_get_a_one_thread_session_and_batches_their_own(
    onnx_cache_dir: Path, session_options: list[Any]
) -> None:
    def threads() -> list[int]:
        return [options.intra_op_num_threads for options in session_options]

    embedder = Embedder.load("onnx", cache_dir=onnx_cache_dir, threads=2)
    assert threads() == [1]  # the query session at once; the batch session when it is used
    embedder.embed_query("a query")
    embedder.embed_query("another query")
    assert threads() == [1]
    embedder.embed_documents(["a document", "another document"])
    assert threads() == [1, 2]


def test_onnx_sessions_keep_no_memory_plan_per_input_shape(
    onnx_cache_dir: Path, session_options: list[Any]
) -> None:
    embedder = Embedder.load("onnx", cache_dir=onnx_cache_dir, threads=2)
    embedder.embed_documents(["a document", "another, longer document"])
    # The query session and the batch session (docs/benchmarks.md: a plan per shape).
    assert [options.enable_mem_pattern for options in session_options] == [False, False]
