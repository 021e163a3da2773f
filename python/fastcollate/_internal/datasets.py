"""Recognising a `datasets.Dataset`, and streams, without importing datasets (it is optional,
and heavy) or torch."""

from __future__ import annotations

import sys
from collections.abc import Generator, Iterable, Iterator, Sized
from typing import Any


def is_datasets_dataset(value: Any) -> bool:
    """Whether `value` is a `datasets.Dataset` (False when datasets was never imported: then
    nothing can be one)."""
    datasets = sys.modules.get("datasets")
    return datasets is not None and isinstance(value, datasets.Dataset)


def stream_kind(value: Any) -> str | None:
    """What makes `value` a stream — a dataset or iterable that can only be read front to back
    — as words for an error message ("a datasets.IterableDataset", "a generator", ...), or None
    for a sized, indexable value. Nothing is read from `value`."""
    datasets = sys.modules.get("datasets")
    if datasets is not None and isinstance(value, datasets.IterableDataset):
        return "a datasets.IterableDataset"
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.utils.data.IterableDataset):
        return f"a torch IterableDataset ({type(value).__name__})"
    if isinstance(value, Generator):
        return "a generator"
    if isinstance(value, Iterator):
        return f"an iterator ({type(value).__name__})"
    if isinstance(value, Iterable) and not isinstance(value, Sized):
        return f"an iterable without __len__ ({type(value).__name__})"
    return None
