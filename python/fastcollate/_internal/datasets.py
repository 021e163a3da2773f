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


def split_dict_kind(value: Any) -> str | None:
    """Words for `value` when it is a `datasets.DatasetDict` or `IterableDatasetDict` (a
    dataset's splits, not a dataset), else None (always None when datasets was never imported)."""
    datasets = sys.modules.get("datasets")
    if datasets is None:
        return None
    for name in ("DatasetDict", "IterableDatasetDict"):
        if isinstance(value, getattr(datasets, name)):
            return f"a datasets.{name}"
    return None


def refuse_split_dict(argument: str, value: Any) -> None:
    """ValueError when `value` (given as `argument`) is a DatasetDict or IterableDatasetDict:
    a trainer trains on one split, so the message names the splits to pick from."""
    kind = split_dict_kind(value)
    if kind is None:
        return
    splits = list(value)
    first = repr(splits[0]) if splits else "'train'"
    raise ValueError(
        f"{argument} is {kind} (splits: {', '.join(map(repr, splits)) or 'none'}), not a "
        f"dataset; pass one split, e.g. {argument}=dataset[{first}]"
    )
