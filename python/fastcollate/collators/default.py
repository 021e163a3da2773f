"""Drop-ins for transformers' DataCollatorWithPadding, default_data_collator and
DefaultDataCollator, on the Rust core."""

from __future__ import annotations

import functools
import importlib.metadata
import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._internal.promotion import UNKNOWN, StackPromotionError, native_dtype, stacked_dtype
from .._internal.rows import check_no_later_keys
from .._internal.tensors import (
    check_return_tensors,
    convert,
    is_torch_tensor,
    text_error,
    torch_module,
)
from .._internal.worker_handover import hands_over
from ..arrow import ArrowBatch
from .native import collate


def _is_integer(value: Any) -> bool:
    """Whether default_data_collator takes a label as an int (int64 labels, else float32).
    transformers 5.22 added numpy integers to Python ints there; before, they gave float32
    labels. The installed transformers decides (the newer rule without one)."""
    if isinstance(value, int):
        return True
    return isinstance(value, np.integer) and _numpy_ints_are_ints()


@functools.cache
def _numpy_ints_are_ints() -> bool:
    try:
        version = importlib.metadata.version("transformers")
    except importlib.metadata.PackageNotFoundError:
        return True
    parts = []
    for part in version.split(".")[:2]:
        digits = "".join(itertools.takewhile(str.isdigit, part))
        parts.append(int(digits or 0))
    return tuple(parts) >= (5, 22)


def _label_dtype(first_label: Any, pt: bool) -> str:
    """int64 or float32 from the first label, as transformers decides: only an array of the
    output's own framework is looked into (`.item()`); any other array counts as not an int."""
    native = is_torch_tensor(first_label) if pt else isinstance(first_label, np.ndarray)
    if native:
        try:
            first_label = first_label.item()
        except (ValueError, RuntimeError):
            raise ValueError(
                "'label' in row 0 holds more than one value; use 'label_ids' (or 'labels') "
                "for a sequence of labels"
            ) from None
    return "int64" if _is_integer(first_label) else "float32"


def holds_tensor_rows(values: list[Any]) -> bool:
    """Whether `torch.tensor(values)` would meet a tensor with dimensions among the rows: torch
    then reads one-element tensors as numbers and the rest by rules of its own, so such a key is
    built with exactly that call (it is rare, and never the rows of a dataset)."""
    if set(map(type, values)) <= _PLAIN_ROWS:
        return False
    return any(is_torch_tensor(v) and v.ndim >= 1 for v in values)


_PLAIN_ROWS = frozenset((int, float, bool, list, tuple, str, type(None)))


def _rows_as_list(features: Any) -> Any:  # a list of rows, or the ArrowBatch as it is
    """The rows as a list (a numpy object array or a tuple of rows, too), each a mapping; a
    non-mapping first row makes every row go through `vars()`, as in transformers."""
    if isinstance(features, ArrowBatch):
        return features
    if isinstance(features, Mapping) or isinstance(features, (str, bytes)):
        raise TypeError("default_data_collator takes a list of rows, not a mapping")
    try:
        features = list(features)
    except TypeError as err:
        raise TypeError(f"default_data_collator takes a list of rows: {err}") from None
    if not features:
        raise ValueError("cannot collate an empty batch: no rows were given")
    if not isinstance(features[0], Mapping):
        try:
            features = [vars(f) for f in features]
        except TypeError:
            raise TypeError(
                f"row 0 is a {type(features[0]).__name__}, not a mapping of feature names to "
                "values (or an object with attributes)"
            ) from None
    for index, row in enumerate(features):
        if not isinstance(row, Mapping):
            raise TypeError(
                f"row {index} is a {type(row).__name__}, not a mapping of feature names to values"
            )
    return features


def _key_values(features: Any, key: str) -> list[Any]:
    values = []
    for index, row in enumerate(features):
        if key not in row:
            raise ValueError(
                f"row {index} has no key '{key}', which the first row has; every row of a "
                "batch needs the same keys"
            )
        values.append(row[key])
    return values


def stacking_framework(return_tensors: Any) -> str:
    """default_data_collator's `return_tensors`: "pt" or "np" (or a TensorType of them)."""
    value = check_return_tensors(return_tensors)
    if value is None:
        # transformers returns None here; a collator that returns nothing is a bug to report.
        raise ValueError("default_data_collator needs return_tensors='pt' or 'np'")
    return value


@hands_over
def default_data_collator(features: list[Any], return_tensors: str = "pt") -> dict[str, Any]:
    """Same output as `transformers.default_data_collator`: stacks every key of the first
    feature (skipping None and str values), `label` (int -> int64, float -> float32) and
    `label_ids` become `labels`. Each key gets the dtype transformers' construction infers
    from all rows (see `_internal.promotion`), produced without a lossy conversion: a batch
    whose dtype cannot be produced exactly (complex, uint64 above int64, ...) raises. No
    padding: rows of different lengths raise a ValueError that names the key and row."""
    return_tensors = stacking_framework(return_tensors)
    features = _rows_as_list(features)
    if not len(features):
        raise ValueError("cannot collate an empty batch: no rows were given")
    if not isinstance(features, ArrowBatch):
        # Keys are the first row's: one only later rows hold would be left out.
        check_no_later_keys(features)
    first = features[0]
    pt = return_tensors == "pt"
    # Rows read from Arrow hold plain Python values, typed alike in every row: row 0 tells.
    arrow = isinstance(features, ArrowBatch)

    keys: list[str] = []
    dtypes: dict[str, str] = {}
    final: dict[str, Any] = {}
    label_key = None
    if "label" in first and first["label"] is not None:
        label_key = "label"
        dtypes["label"] = _label_dtype(first["label"], pt)
    elif "label_ids" in first and first["label_ids"] is not None:
        label_key = "label_ids"
        first_ids = first["label_ids"]
        # transformers stacks arrays of its own framework (promoting their dtypes); anything
        # else gets int64 / float32 from the first element (a 0-d tensor counts as not an int).
        native = is_torch_tensor(first_ids) if pt else isinstance(first_ids, np.ndarray)
        if not native:
            try:
                first_id = first_ids[0]
            except (TypeError, IndexError, KeyError):
                raise ValueError(
                    "'label_ids' in row 0 is not a non-empty sequence; its first element "
                    "decides the labels' dtype"
                ) from None
            dtypes["label_ids"] = "int64" if _is_integer(first_id) else "float32"
    if label_key is not None:
        keys.append(label_key)
    for key, value in first.items():
        if key not in ("label", "label_ids") and value is not None and not isinstance(value, str):
            keys.append(key)
    by_torch: dict[str, Any] = {}
    constructed: dict[str, Any] = {}
    for key in keys:
        values = [first[key]] if arrow else _key_values(features, key)
        by_torch_tensor = key in dtypes or not (
            is_torch_tensor(first[key]) or isinstance(first[key], np.ndarray)
        )
        if pt and by_torch_tensor and not arrow and holds_tensor_rows(values):
            by_torch[key] = (values, dtypes.pop(key, None))
            continue
        if key in dtypes:
            continue
        try:
            dtype = stacked_dtype(values, return_tensors, first[key])
        except StackPromotionError as error:
            raise StackPromotionError(f"'{key}': {error}") from None
        if dtype is not UNKNOWN and str(dtype).removeprefix("torch.") == "uint64":
            # Exact only as uint64, which the native module does not produce: built as
            # transformers builds it (the values above int64 stay exact there).
            constructed[key] = _stacked_like_transformers(values, first[key], pt)
            continue
        request = native_dtype(dtype) if dtype is not UNKNOWN else None
        if dtype is not UNKNOWN and request is None:
            raise TypeError(
                f"'{key}' would be stacked as {dtype}, which fastcollate does not produce; "
                "convert it to a real or integer dtype"
            )
        if request is not None:
            dtypes[key] = request
            final[key] = dtype

    native_keys = [key for key in keys if key not in by_torch and key not in constructed]
    native_batch: dict[str, Any] = {}
    if native_keys:
        native_batch = collate(features, [], float32=pt, dtypes=dtypes, keys=native_keys)
    out = convert(native_batch, return_tensors)
    if by_torch:
        torch = torch_module()
        for key, (values, dtype) in by_torch.items():
            dtype = None if dtype is None else getattr(torch, dtype)
            out[key] = torch.tensor(values, dtype=dtype)
        out = {key: out[key] for key in keys}
    if constructed:
        out.update(constructed)
        out = {key: out[key] for key in keys}
    for key, dtype in final.items():
        if not isinstance(native_batch.get(key), np.ndarray):
            continue  # left as objects: built by transformers' own construction, as it is
        value = out[key]
        if pt:
            if value.dtype != dtype:
                out[key] = value.to(dtype)
        elif value.dtype != dtype:
            out[key] = value.astype(dtype)
    explicit = dtypes.get(label_key) if label_key is not None else None
    if explicit is not None and label_key not in by_torch and label_key not in final:
        # Labels transformers builds with an explicit dtype that the native module left as
        # objects (tensors with dimensions, ...): the same explicit conversion.
        assert label_key is not None  # `explicit` is None without a label key
        value = out[label_key]
        if pt and value.dtype != getattr(torch_module(), explicit):
            out[label_key] = value.to(getattr(torch_module(), explicit))
        elif not pt and value.dtype != np.dtype(explicit):
            try:
                out[label_key] = value.astype(explicit)
            except ValueError:
                values = [first[label_key]] if arrow else _key_values(features, label_key)
                text = text_error(label_key, values, return_tensors)
                if text is None:
                    raise
                raise text from None
    if label_key is not None:
        labels = out.pop(label_key)
        out = {"labels": labels, **out}
    return out


def _stacked_like_transformers(values: list[Any], first: Any, pt: bool) -> Any:
    """One key's values stacked by transformers' own construction in default_data_collator."""
    if pt:
        torch = torch_module()
        if is_torch_tensor(first):
            return torch.stack(values)
        if isinstance(first, np.ndarray):
            return torch.from_numpy(np.stack(values))
        return torch.tensor(values)
    if isinstance(first, np.ndarray):
        return np.stack(values)
    return np.array(values)


def torch_default_data_collator(features: list[Any]) -> dict[str, Any]:
    """`default_data_collator(features, return_tensors="pt")`, under transformers' name."""
    return default_data_collator(features, "pt")


def numpy_default_data_collator(features: list[Any]) -> dict[str, Any]:
    """`default_data_collator(features, return_tensors="np")`, under transformers' name."""
    return default_data_collator(features, "np")


@dataclass
class DefaultDataCollator:
    """Same as `transformers.DefaultDataCollator`: default_data_collator with a stored
    return_tensors."""

    return_tensors: str = "pt"

    def __post_init__(self) -> None:
        # A bad return_tensors raises here, by the rule each call applies.
        self.checked_framework(self.return_tensors)

    # The rule a call checks `return_tensors` by (the flattening collator has its own).
    checked_framework = staticmethod(stacking_framework)

    @property
    def accepts_arrow_batches(self) -> bool:
        """True unless a subclass replaces `__call__` (it may expect a list of rows)."""
        return type(self).__call__ is DefaultDataCollator.__call__

    def __call__(self, features: list[dict[str, Any]],
                 return_tensors: str | None = None) -> dict[str, Any]:
        if return_tensors is None:
            return_tensors = self.return_tensors
        return default_data_collator(features, return_tensors)


# Takes fastcollate.ArrowBatch batches (see arrow.accepts_arrow_batches).
for _collator in (default_data_collator, torch_default_data_collator, numpy_default_data_collator):
    _collator.accepts_arrow_batches = True  # type: ignore[attr-defined]
