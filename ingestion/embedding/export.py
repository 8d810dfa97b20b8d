"""One-time ONNX export of the packaged transformer, cached on disk and shared by processes.

Several Celery workers and the web process may start at once with an empty cache: an flock
makes exactly one of them export while the others wait, and the file only ever appears through
an atomic rename, so a reader never sees a half-written model.
"""

import fcntl
import hashlib
import os
import tempfile
import warnings
from pathlib import Path

from ingestion.embedding.model import model_dir

# Bump whenever export_onnx() changes what it writes, so stale caches are not reused.
EXPORT_VERSION = 1
OPSET = 17
INPUT_NAMES = ("input_ids", "attention_mask")
OUTPUT_NAME = "token_embeddings"


def cache_key(weights_dir: Path) -> str:
    digest = hashlib.sha256(f"export-v{EXPORT_VERSION}-opset{OPSET}".encode())
    for name in ("config.json", "model.safetensors"):
        with (weights_dir / name).open("rb") as f:
            digest.update(hashlib.file_digest(f, "sha256").digest())
    return digest.hexdigest()[:16]


def ensure_onnx_model(cache_dir: Path, weights_dir: Path | None = None) -> Path:
    """Return the path of the exported model, exporting it first if no process has yet."""
    weights_dir = weights_dir or model_dir()
    target = cache_dir / f"all-MiniLM-L6-v2-{cache_key(weights_dir)}.onnx"
    if target.exists():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    # The lock file is never deleted: unlinking it would let a late process lock a new inode
    # while another still holds the old one.
    with (cache_dir / f"{target.name}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.exists():
            # Holding the lock means nobody is exporting this target: leftovers are from a
            # process killed mid-export.
            for stale in cache_dir.glob(f".{target.name}.*.tmp"):
                stale.unlink(missing_ok=True)
            _export_atomically(weights_dir, target)
    return target


def _export_atomically(weights_dir: Path, target: Path) -> None:
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        export_onnx(weights_dir, tmp)
        # mkstemp creates 0600; workers running as another user must be able to read the cache.
        tmp.chmod(0o644)
        with tmp.open("rb") as f:
            os.fsync(f.fileno())
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)


def export_onnx(weights_dir: Path, destination: Path) -> None:
    # torch is imported here only: once the cache exists, the ONNX runtime never loads it.
    import torch
    from transformers import AutoModel

    from ingestion.embedding.model import load_tokenizer

    # Eager attention traces to plain MatMul/Softmax: a smaller graph than SDPA's mask plumbing
    # (~60 fewer Shape/Gather/Where nodes) that onnxruntime ran at least as fast.
    bert = AutoModel.from_pretrained(
        weights_dir, attn_implementation="eager", local_files_only=True
    ).eval()

    class TokenEmbeddings(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            hidden: torch.Tensor = self.bert(
                input_ids=input_ids, attention_mask=attention_mask
            ).last_hidden_state
            return hidden

    # A padded example batch, so tracing records the attention-mask path rather than a
    # shortcut taken for all-ones masks.
    example = load_tokenizer().encode_batch(["a short text", "a somewhat longer example text"])
    inputs = (
        torch.tensor([e.ids for e in example], dtype=torch.long),
        torch.tensor([e.attention_mask for e in example], dtype=torch.long),
    )
    dynamic = {0: "batch", 1: "sequence"}
    with torch.no_grad(), warnings.catch_warnings():
        # The legacy exporter warns about its own deprecation and about a traced padding branch
        # that never fires for an encoder; tests check the result against sentence-transformers.
        warnings.simplefilter("ignore")
        torch.onnx.export(
            TokenEmbeddings(),
            inputs,
            str(destination),
            input_names=list(INPUT_NAMES),
            output_names=[OUTPUT_NAME],
            dynamic_axes=dict.fromkeys((*INPUT_NAMES, OUTPUT_NAME), dynamic),
            opset_version=OPSET,
            dynamo=False,
        )
