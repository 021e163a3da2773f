"""Drop-ins for transformers' DataCollatorWithPadding, default_data_collator and
DefaultDataCollator, on the Rust core."""

from __future__ import annotations

from collections import UserDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._arrow import collate
from ._padding import pad
from ._tensors import check_return_tensors, convert, is_torch_tensor, torch_module


@dataclass
class DataCollatorWithPadding:
    """Same fields and output as `transformers.DataCollatorWithPadding`: pads with the
    tokenizer's settings, then renames `label` / `label_ids` to `labels`."""

    tokenizer: Any
    padding: bool | str = True
    max_length: int | None = None
    pad_to_multiple_of: int | None = None
    return_tensors: str = "pt"

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, Any]:
        batch = pad(
            features,
            self.tokenizer,
            padding=self.padding,
            max_length=self.max_length,
            pad_to_multiple_of=self.pad_to_multiple_of,
            return_tensors=self.return_tensors,
        )
        # Renamed in the underlying dict: a BatchEncoding's Python-level item methods cost
        # about a microsecond a batch, a tenth of a small batch's time.
        data = batch.data if isinstance(batch, UserDict) else batch
        for old in ("label", "label_ids"):
            if old in data:
                data["labels"] = data.pop(old)
        return batch


def _is_integer(value: Any) -> bool:
    return isinstance(value, (int, np.integer))


def _label_dtype(first_label: Any) -> str:
    if isinstance(first_label, np.ndarray) or is_torch_tensor(first_label):
        first_label = first_label.item()
    return "int64" if _is_integer(first_label) else "float32"


def default_data_collator(features: list[Any], return_tensors: str = "pt") -> dict[str, Any]:
    """Same output as `transformers.default_data_collator`: stacks every key of the first
    feature (skipping None and str values), `label` (int -> int64, float -> float32) and
    `label_ids` become `labels`. No padding: rows of different lengths raise a ValueError that
    names the key and row."""
    return_tensors = check_return_tensors(return_tensors)
    if return_tensors is None:
        # transformers returns None here; a collator that returns nothing is a bug to report.
        raise ValueError("default_data_collator needs return_tensors='pt' or 'np'")
    if not features:
        raise ValueError("cannot collate an empty batch: no rows were given")
    if not isinstance(features[0], Mapping):
        features = [vars(f) for f in features]
    first = features[0]
    pt = return_tensors == "pt"

    keys: list[str] = []
    dtypes: dict[str, str] = {}
    label_key = None
    if "label" in first and first["label"] is not None:
        label_key = "label"
        dtypes["label"] = _label_dtype(first["label"])
    elif "label_ids" in first and first["label_ids"] is not None:
        label_key = "label_ids"
        first_ids = first["label_ids"]
        # transformers stacks arrays of its own framework (keeping their dtype); anything else
        # gets int64 / float32 from the first element (a 0-d tensor counts as not an int).
        native = is_torch_tensor(first_ids) if pt else isinstance(first_ids, np.ndarray)
        if not native:
            dtypes["label_ids"] = "int64" if _is_integer(first_ids[0]) else "float32"
    if label_key is not None:
        keys.append(label_key)
    for key, value in first.items():
        if key not in ("label", "label_ids") and value is not None and not isinstance(value, str):
            keys.append(key)

    native = collate(features, [], float32=pt, dtypes=dtypes, keys=keys)
    out = convert(native, return_tensors)
    # Rows that are numpy arrays / tensors keep their dtype (np.stack / torch.stack do).
    for key in keys:
        if key in dtypes:
            continue
        value = first[key]
        if isinstance(value, np.ndarray):
            if pt:
                out[key] = out[key].to(torch_module().from_numpy(value[:0]).dtype)
            elif out[key].dtype != value.dtype:
                out[key] = out[key].astype(value.dtype)
        elif isinstance(value, (list, tuple)) and out[key].numel() == 0 if pt else (
            isinstance(value, (list, tuple)) and out[key].size == 0
        ):
            # np.array([[]]) is float64 and torch.tensor([[]]) float32: no value to infer from.
            out[key] = out[key].float() if pt else out[key].astype(np.float64)
        elif is_torch_tensor(value):
            out[key] = out[key].to(value.dtype) if pt else out[key].astype(
                torch_module().empty(0, dtype=value.dtype).numpy().dtype
            )
    if label_key is not None:
        labels = out.pop(label_key)
        out = {"labels": labels, **out}
    return out


@dataclass
class DefaultDataCollator:
    """Same as `transformers.DefaultDataCollator`: default_data_collator with a stored
    return_tensors."""

    return_tensors: str = "pt"

    def __call__(self, features: list[dict[str, Any]], return_tensors=None) -> dict[str, Any]:
        if return_tensors is None:
            return_tensors = self.return_tensors
        return default_data_collator(features, return_tensors)
