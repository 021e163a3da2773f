"""What fastcollate is timed against: transformers' collators, and for
DataCollatorWithPadding the hand-written loops a user would otherwise write (its output, without
transformers)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

Collate = Callable[[list[dict[str, Any]]], dict[str, Any]]


def transformers_collator(name: str) -> type:
    """transformers' class of that name, imported when a case is built."""
    import transformers

    return getattr(transformers, name)


def _padded_keys(rows: Sequence[dict[str, Any]]) -> list[str]:
    return [k for k in ("input_ids", "token_type_ids", "attention_mask") if k in rows[0]]


def _pad_values(tokenizer) -> dict[str, int]:
    return {
        "input_ids": tokenizer.pad_token_id,
        "token_type_ids": tokenizer.pad_token_type_id,
        "attention_mask": 0,
    }


def _labels(rows: Sequence[dict[str, Any]]):
    import torch

    return torch.tensor([r["label"] for r in rows], dtype=torch.int64)


def pad_sequence_baseline(tokenizer) -> Collate:
    """torch's `pad_sequence` per key."""
    import torch
    from torch.nn.utils.rnn import pad_sequence

    pad_values = _pad_values(tokenizer)

    def as_tensor(value):
        if isinstance(value, torch.Tensor):
            return value
        if isinstance(value, np.ndarray):
            return torch.from_numpy(value)
        return torch.tensor(value, dtype=torch.int64)

    def collate(rows):
        batch = {
            key: pad_sequence(
                [as_tensor(r[key]) for r in rows],
                batch_first=True,
                padding_value=pad_values[key],
            )
            for key in _padded_keys(rows)
        }
        batch["labels"] = _labels(rows)
        return batch

    return collate


def numpy_loop_baseline(tokenizer) -> Collate:
    """A numpy array filled with the pad value, each row copied in."""
    import torch

    pad_values = _pad_values(tokenizer)

    def collate(rows):
        first = rows[0]["input_ids"]
        # numpy reads lists and arrays directly; a tensor is fastest through .numpy() (shared).
        to_numpy = (lambda v: v.numpy()) if isinstance(first, torch.Tensor) else (lambda v: v)
        batch = {}
        for key in _padded_keys(rows):
            values = [to_numpy(r[key]) for r in rows]
            longest = max(len(v) for v in values)
            out = np.full((len(values), longest), pad_values[key], dtype=np.int64)
            for i, v in enumerate(values):
                out[i, : len(v)] = v
            batch[key] = torch.from_numpy(out)
        batch["labels"] = _labels(rows)
        return batch

    return collate
