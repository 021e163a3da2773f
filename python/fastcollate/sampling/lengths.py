"""Sequence lengths for the samplers: `as_lengths` (checked int64 lengths from a list, array,
tensor or dataset column) and `sequence_lengths` (read from a dataset's Arrow storage, or row by
row where it has none)."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterable, Mapping
from typing import Any, cast

import numpy as np

from .._internal.datasets import is_datasets_dataset, stream_kind
from .._internal.tensors import is_torch_tensor, torch_module

_INT64_MAX = np.iinfo(np.int64).max
_INT64_MIN = np.iinfo(np.int64).min


class LengthOverflowError(ValueError, OverflowError):
    """A length past the int64 range: a ValueError, as transformers' grouping raises (torch
    cannot hold the value), and an OverflowError, as fastcollate raised before."""


def _first_out_of_range(values: Any) -> tuple[int, int] | None:
    """The first Python int of a list or tuple that int64 cannot hold, with its index."""
    if type(values) not in (list, tuple):
        return None
    for index, value in enumerate(values):
        if type(value) is int and not _INT64_MIN <= value <= _INT64_MAX:
            return index, value
    return None


def _is_integer(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _first_non_integer(values: Iterable[Any]) -> tuple[int, Any] | None:
    for index, value in enumerate(values):
        if not _is_integer(value) and not (
            (isinstance(value, np.ndarray) or is_torch_tensor(value))
            and value.ndim == 0
            and _is_integer(value.item())
        ):
            return index, value
    return None


def _datasets_column(value: Any) -> tuple[Any, str] | None:
    """`dataset["length"]` in datasets >= 4 is a lazy Column: (source dataset, column name)."""
    datasets = sys.modules.get("datasets")
    if datasets is None:
        return None
    column_type = getattr(datasets.arrow_dataset, "Column", None)
    if column_type is None or not isinstance(value, column_type):
        return None
    if not isinstance(value.source, datasets.Dataset):
        return None
    return value.source, value.column_name


def reject_stream(value: Any, argument: str, owner: str | None = None) -> None:
    """A ValueError (what transformers' LengthGroupedSampler raises for a datasets stream) when
    `value` is a stream, raised before anything is read from it: every sampler needs each
    row's length before its first batch and picks rows by index, and a stream gives neither —
    an infinite one would never end, a remote one would be downloaded whole."""
    kind = stream_kind(value)
    if kind is None:
        return
    if argument == "dataset":
        remedy = (
            "use a map-style dataset (a datasets.Dataset: load_dataset without streaming=True, "
            "or Dataset.from_generator), or pass lengths="
        )
    else:
        remedy = "pass the lengths as a list, numpy array or tensor"
    prefix = f"{owner}: " if owner else ""
    raise ValueError(
        f"{prefix}{argument} is {kind}, which can only be read front to back; length-aware "
        f"sampling needs every row's length up front and random access to the rows — {remedy}"
    )


def as_lengths(lengths: Any, name: str = "lengths") -> np.ndarray:
    """Lengths as a 1-D int64 array (no copy for a contiguous int64 array); a TypeError names the
    first value that is not an integer, a ValueError a stream (which is not read). Negative
    values are left for the Rust core to report."""
    reject_stream(lengths, name)
    column = _datasets_column(lengths)
    if column is not None:
        source, column_name = column
        return sequence_lengths(source, length_column_name=column_name)
    if is_torch_tensor(lengths):
        if (
            lengths.dtype.is_floating_point
            or lengths.dtype.is_complex
            or lengths.dtype == (torch_module().bool)
        ):
            raise TypeError(f"{name} must hold integers, not a {lengths.dtype} tensor")
        try:
            array = lengths.detach().cpu().numpy()
        except NotImplementedError as err:  # a meta tensor: no values to read
            raise RuntimeError(
                f"{name} is a {lengths.device.type} tensor, whose values cannot be read: {err}"
            ) from None
    elif isinstance(lengths, np.ndarray):
        array = lengths
    else:
        try:
            array = np.asarray(lengths)
        except (OverflowError, ValueError) as err:
            raise TypeError(f"{name} must be a flat sequence of integers: {err}") from None
        if array.size == 0:
            array = array.astype(np.int64)  # np.asarray([]) is float64
        if array.dtype.kind not in "iu":
            # Ints past int64 make numpy fall back to float64 or object arrays.
            outside = _first_out_of_range(lengths)
            if outside is not None:
                index, value = outside
                raise LengthOverflowError(
                    f"{name}[{index}] is {value}, outside what int64 can hold"
                )
            found = _first_non_integer(lengths) if array.ndim == 1 else None
            if found is not None:
                index, value = found
                raise TypeError(
                    f"{name}[{index}] is {value!r} (a {type(value).__name__}); lengths must be "
                    "integers"
                )
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, not of shape {array.shape}")
    if array.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integers, not {array.dtype} values")
    if array.dtype == np.uint64 and array.size and array.max() > _INT64_MAX:
        index = int(np.argmax(array > _INT64_MAX))
        raise LengthOverflowError(
            f"{name}[{index}] is {array[index]}, larger than int64 can hold"
        )
    return np.ascontiguousarray(array, dtype=np.int64)


def _missing_column(column: str, available: Iterable[str]) -> ValueError:
    return ValueError(
        f"the dataset has no column '{column}' to read lengths from (columns: "
        f"{', '.join(available)}); pass column= or length_column_name=, or lengths directly"
    )


def _arrow_lengths(dataset: Any, column: str, length_column_name: str | None) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.compute as pc

    table = dataset.data.table
    if length_column_name is not None:
        if length_column_name not in dataset.column_names:
            raise _missing_column(length_column_name, dataset.column_names)
        values = table.column(length_column_name)
        if not pa.types.is_integer(values.type):
            raise TypeError(
                f"length column '{length_column_name}' holds {values.type} values; it must hold "
                "integers"
            )
        what = f"'{length_column_name}'"
    else:
        if column not in dataset.column_names:
            raise _missing_column(column, dataset.column_names)
        values = table.column(column)
        kind = values.type
        if not (
            pa.types.is_list(kind)
            or pa.types.is_large_list(kind)
            or pa.types.is_fixed_size_list(kind)
            or pa.types.is_list_view(kind)
            or pa.types.is_large_list_view(kind)
        ):
            raise TypeError(
                f"column '{column}' holds {kind} values, not lists, so it has no sequence "
                "lengths; name a list column (e.g. input_ids) or a length_column_name"
            )
        values = pc.list_value_length(values)
        what = f"'{column}'"
    mapping = None
    if dataset._indices is not None:
        # After shuffle/select/filter the dataset is a view: row i is table row mapping[i].
        mapping = dataset._indices.column(0).to_numpy()
    if values.null_count > 0:
        is_null = pc.is_null(values).to_numpy(zero_copy_only=False)
        if mapping is not None:
            is_null = is_null[mapping]
        if is_null.any():
            row = int(np.argmax(is_null))
            raise ValueError(f"row {row} of the dataset has no {what} value (null)")
        values = pc.fill_null(values, 0)
    lengths = values.to_numpy()
    if lengths.dtype == np.uint64 and lengths.size and lengths.max() > _INT64_MAX:
        raise OverflowError(f"{what} holds a length larger than int64 can hold")
    lengths = lengths.astype(np.int64, copy=False)
    if mapping is not None:
        lengths = lengths[mapping]
    if length_column_name is not None and lengths.size and lengths.min() < 0:
        row = int(np.argmax(lengths < 0))
        raise ValueError(f"row {row} of the dataset has length {lengths[row]} in {what}")
    return cast(np.ndarray, lengths)


def _arrow_readable(dataset: Any) -> bool:
    """Rows decoded through a transform (set_transform / with_transform) may not be what Arrow
    holds; their lengths need the row pass, as transformers makes."""
    return getattr(dataset, "_format_type", None) != "custom"


def _progress(iterable: Iterable[Any], total: int | None) -> Iterable[Any]:
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm comes with transformers and datasets
        return iterable
    return cast(Iterable[Any], tqdm(iterable, total=total, desc="Computing sequence lengths",
                                    disable=None))


def _rows(dataset: Any) -> tuple[Iterable[Any], int | None]:
    """The rows as transformers walks them (`for row in dataset`; a map-style torch dataset
    without `__iter__` is read by index), stopping at `len(dataset)` so that a dataset whose
    `__getitem__` never raises IndexError still ends."""
    size = _size(dataset)
    rows = iter(dataset)
    if size is not None:
        rows = itertools.islice(rows, size)
    return _progress(rows, size), size


def _check_row_count(count: int, size: int | None) -> None:
    if size is not None and count != size:
        raise ValueError(
            f"the dataset reports {size} rows but yielded {count}; lengths must match the "
            "dataset size"
        )


def _row_lengths(dataset: Any, column: str) -> np.ndarray:
    """Decodes every row, as transformers does for datasets that are not Arrow-backed."""
    rows, size = _rows(dataset)
    lengths: list[int] = []
    for row_index, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise ValueError(
                f"row {row_index} of the dataset is a {type(row).__name__}, not a mapping "
                f"with an '{column}' key; lengths can only be inferred from mappings"
            )
        if column not in row:
            raise ValueError(
                f"row {row_index} of the dataset has no '{column}' key (keys: "
                f"{', '.join(map(str, row.keys()))}); pass column= or lengths directly"
            )
        value = row[column]
        if value is None:
            raise ValueError(f"row {row_index} of the dataset has no '{column}' value (None)")
        try:
            lengths.append(len(value))
        except TypeError:
            raise TypeError(
                f"'{column}' in row {row_index} is a {type(value).__name__}, which has no length"
            ) from None
    _check_row_count(len(lengths), size)
    return np.asarray(lengths, dtype=np.int64)


def _row_length_column(dataset: Any, length_column_name: str) -> np.ndarray:
    rows, size = _rows(dataset)
    values = []
    for row_index, row in enumerate(rows):
        if not isinstance(row, Mapping) or length_column_name not in row:
            raise ValueError(f"row {row_index} of the dataset has no '{length_column_name}' key")
        values.append(row[length_column_name])
    _check_row_count(len(values), size)
    lengths = as_lengths(values, name=f"'{length_column_name}'")
    if lengths.size and lengths.min() < 0:
        row = int(np.argmax(lengths < 0))
        raise ValueError(
            f"row {row} of the dataset has length {lengths[row]} in '{length_column_name}'"
        )
    return lengths


def sequence_lengths(
    dataset: Any, column: str = "input_ids", length_column_name: str | None = None
) -> np.ndarray:
    """The length of every row's `column` (an int64 array, in dataset order).

    For a `datasets.Dataset` the lengths come straight from the Arrow list offsets, no row is
    decoded, and shuffle/select/filter views are honoured through the dataset's indices
    mapping; with `length_column_name` that integer column is read instead. Other datasets
    (torch datasets, lists of dicts) take one pass over the rows, with a progress bar.

    Raises ValueError for a missing column, null rows or a size mismatch, and TypeError for a
    column that holds no lists (or a length column that holds no integers). A stream (a
    `datasets.IterableDataset`, a torch `IterableDataset`, a generator) is a ValueError at once:
    its rows are not read."""
    reject_stream(dataset, "dataset", "sequence_lengths")
    if is_datasets_dataset(dataset) and _arrow_readable(dataset):
        lengths = _arrow_lengths(dataset, column, length_column_name)
    elif length_column_name is not None:
        lengths = _row_length_column(dataset, length_column_name)
    else:
        lengths = _row_lengths(dataset, column)
    size = _size(dataset)
    if size is not None and len(lengths) != size:
        raise ValueError(
            f"found {len(lengths)} lengths for a dataset of {size} rows; lengths must match the "
            "dataset size"
        )
    return lengths


def _size(dataset: Any) -> int | None:
    try:
        return len(dataset)
    except TypeError:
        return None
