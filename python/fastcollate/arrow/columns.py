"""Numpy views of a `datasets.Dataset`'s Arrow buffers, made once per column and process, and
the native `ArrowColumn` built from them: which columns the Arrow path can read, and how."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, cast

import numpy as np

from .. import _native


# Cached: a record batch stream asks about the same few types on every batch.
@lru_cache(maxsize=256)
def _value_type(arrow_type: Any) -> str | None:
    """The numpy name of a numeric / boolean Arrow type, None for anything else."""
    import pyarrow as pa

    types = pa.types
    if types.is_boolean(arrow_type):
        return "bool"
    if types.is_integer(arrow_type) or types.is_floating(arrow_type):
        return cast(str, np.dtype(arrow_type.to_pandas_dtype()).name)
    return None


@lru_cache(maxsize=256)
def column_kind(arrow_type: Any) -> str | None:
    """ "scalar" (a number per row), "sequence" (a flat list of numbers), or None: a type the
    Arrow path does not read (strings, nested lists, structs, ...)."""
    import pyarrow as pa

    types = pa.types
    if _value_type(arrow_type) is not None:
        return "scalar"
    if (
        types.is_list(arrow_type)
        or types.is_large_list(arrow_type)
        or types.is_fixed_size_list(arrow_type)
    ) and _value_type(arrow_type.value_type) is not None:
        return "sequence"
    return None


def _read_only(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


def _view(buffer: Any, dtype: Any, offset: int, length: int) -> np.ndarray:
    """`length` items of `buffer` from item `offset`, as a read-only numpy view (no copy)."""
    dtype = np.dtype(dtype)
    if length == 0 or buffer is None:
        return _read_only(np.empty(0, dtype))
    return _read_only(
        np.frombuffer(buffer, dtype=dtype, count=length, offset=offset * dtype.itemsize)
    )


def _bitmap(buffer: Any, bit_offset: int, null_count: int) -> tuple[Any, ...] | None:
    if null_count == 0 or buffer is None:
        return None
    return (_read_only(np.frombuffer(buffer, dtype=np.uint8)), bit_offset)


def _values(array: Any) -> tuple[Any, ...]:
    """(type name, view, length, bit offset, validity) of a primitive Arrow array."""
    name = _value_type(array.type)
    buffers = array.buffers()
    validity = _bitmap(buffers[0], array.offset, array.null_count)
    if name == "bool":
        bits = buffers[1]
        view = _read_only(np.frombuffer(bits, dtype=np.uint8)) if bits is not None else None
        if view is None:
            view = _read_only(np.empty(0, np.uint8))
        return name, view, len(array), array.offset, validity
    # Half floats travel as their bits; the core converts them exactly.
    dtype = np.uint16 if name == "float16" else name
    return name, _view(buffers[1], dtype, array.offset, len(array)), len(array), 0, validity


def _chunk(array: Any) -> tuple[Any, ...]:
    """One Arrow array as the native ArrowColumn takes it, honoring the array's own slice."""
    import pyarrow as pa

    types = pa.types
    rows = len(array)
    row_validity = _bitmap(array.buffers()[0], array.offset, array.null_count)
    if types.is_fixed_size_list(array.type):
        size = array.type.list_size
        # `.values` ignores the slice: row r starts at (offset + r) * size.
        first = array.offset
        # Over an immutable bytes object, as the other views are over Arrow's buffers: memory
        # no numpy array owns, so none can be resized while the native side reads it.
        computed = np.arange(first, first + rows + 1, dtype=np.int64) * size
        offsets = np.frombuffer(computed.tobytes(), dtype=np.int64)
        child = array.values
    elif types.is_list(array.type) or types.is_large_list(array.type):
        dtype = np.int64 if types.is_large_list(array.type) else np.int32
        offsets = _view(array.buffers()[1], dtype, array.offset, rows + 1)
        # Offsets index the child array from its own start (the child may be a slice too).
        child = array.values
    else:
        name, view, length, bit_offset, validity = _values(array)
        return (rows, None, name, view, length, bit_offset, validity, None)
    name, view, length, bit_offset, value_validity = _values(child)
    return (rows, offsets, name, view, length, bit_offset, row_validity, value_validity)


def native_column(key: str, chunked: Any) -> Any:
    chunks = [_chunk(chunk) for chunk in chunked.chunks if len(chunk)]
    return _native.ArrowColumn(key, chunks)


def python_format(dataset: Any) -> bool:
    return dataset.format.get("type") in (None, "python")


def visible_columns(dataset: Any) -> list[str]:
    """The columns a row of `dataset` holds (its format may show only some)."""
    fmt = dataset.format
    columns = fmt.get("columns")
    if columns is None or fmt.get("output_all_columns"):
        return list(dataset.column_names)
    return [c for c in dataset.column_names if c in columns]


def readable_columns(dataset: Any) -> list[str]:
    """The columns of `dataset` the Arrow path reads: numbers and flat lists of numbers."""
    table = dataset.data.table
    return [c for c in visible_columns(dataset) if column_kind(table.schema.field(c).type)]


