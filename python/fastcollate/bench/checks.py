"""fastcollate's output against transformers' on the same batch, before anything is timed."""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import BenchError


def difference(ours: Any, theirs: Any) -> str | None:
    """None when one value equals transformers' (type, dtype, shape and values), else what
    differs."""
    import torch

    if isinstance(theirs, torch.Tensor):
        if not isinstance(ours, torch.Tensor):
            return f"a {type(ours).__name__}, not a tensor"
        if ours.dtype != theirs.dtype or ours.shape != theirs.shape:
            return f"{ours.dtype}{tuple(ours.shape)} != {theirs.dtype}{tuple(theirs.shape)}"
        return None if torch.equal(ours, theirs) else "different values"
    if isinstance(theirs, np.ndarray):
        if not isinstance(ours, np.ndarray) or ours.dtype != theirs.dtype:
            return f"{type(ours).__name__} != {theirs.dtype} array"
        return None if np.array_equal(ours, theirs) else "different values"
    return None if ours == theirs else f"{ours!r} != {theirs!r}"


def difference_but_masks(ours: dict, theirs: dict) -> str | None:
    """For native masked-LM masking, which draws other masks than transformers': every key but
    the masked input_ids and labels is equal, those two have the same type, dtype and shape, and
    the ids before masking (the label where set, else the input id) are equal."""
    if list(ours) != list(theirs):
        return f"keys {list(ours)} != transformers' {list(theirs)}"
    for key in theirs:
        if key in ("input_ids", "labels"):
            a, b = ours[key], theirs[key]
            if type(a) is not type(b) or a.dtype != b.dtype or a.shape != b.shape:
                return f"'{key}': {type(a).__name__} {a.dtype}{tuple(a.shape)} != transformers'"
        else:
            problem = difference(ours[key], theirs[key])
            if problem is not None:
                return f"'{key}' differs from transformers': {problem}"

    def unmasked(batch: dict) -> np.ndarray:
        ids, labels = np.asarray(batch["input_ids"]), np.asarray(batch["labels"])
        return np.where(labels != -100, labels, ids)

    if not np.array_equal(unmasked(ours), unmasked(theirs)):
        return "the ids before masking differ from transformers'"
    return None


def check_same(label: str, ours: dict, theirs: dict) -> None:
    """Raises BenchError naming the first key whose value differs from transformers'."""
    if set(ours) != set(theirs):
        raise BenchError(f"{label}: keys {sorted(ours)} != transformers' {sorted(theirs)}")
    for key in theirs:
        problem = difference(ours[key], theirs[key])
        if problem is not None:
            raise BenchError(f"{label}: '{key}' differs from transformers': {problem}")
