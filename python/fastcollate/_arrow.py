"""Collating straight from a `datasets.Dataset`'s Arrow storage.

`ArrowBatches(dataset)` is a map-style dataset for `torch.utils.data.DataLoader`. Indexing it
gives the usual Python rows, but a batch request (`__getitems__`, which DataLoader uses) gives an
`ArrowBatch`: the dataset and the requested indices, nothing more. fastcollate's padding
collators recognize it and read the rows straight from the Arrow buffers in Rust, with the
interpreter released: no Python object per row or token. The output is exactly what the same
collator gives for the same rows read through `datasets` (the Python-row path).

Per process, each column's Arrow chunks are turned once into numpy views of their offsets,
values and validity buffers (no copy) and handed to a native `ArrowColumn`; datasets' indices
mapping (after shuffle / select / filter) is read the same way. A batch then costs one native
call.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from . import _native
from ._rows import missing_main_input

__all__ = ["ArrowBatch", "ArrowBatches", "wrap_for_trainer"]


def _value_type(arrow_type: Any) -> str | None:
    """The numpy name of a numeric / boolean Arrow type, None for anything else."""
    import pyarrow as pa

    types = pa.types
    if types.is_boolean(arrow_type):
        return "bool"
    if types.is_integer(arrow_type) or types.is_floating(arrow_type):
        return np.dtype(arrow_type.to_pandas_dtype()).name
    return None


def _column_kind(arrow_type: Any) -> str | None:
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


def _bitmap(buffer: Any, bit_offset: int, null_count: int) -> tuple | None:
    if null_count == 0 or buffer is None:
        return None
    return (_read_only(np.frombuffer(buffer, dtype=np.uint8)), bit_offset)


def _values(array: Any) -> tuple:
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


def _chunk(array: Any) -> tuple:
    """One Arrow array as the native ArrowColumn takes it, honoring the array's own slice."""
    import pyarrow as pa

    types = pa.types
    rows = len(array)
    row_validity = _bitmap(array.buffers()[0], array.offset, array.null_count)
    if types.is_fixed_size_list(array.type):
        size = array.type.list_size
        # `.values` ignores the slice: row r starts at (offset + r) * size.
        first = array.offset
        offsets = _read_only(np.arange(first, first + rows + 1, dtype=np.int64) * size)
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


def _native_column(key: str, chunked: Any) -> Any:
    chunks = [_chunk(chunk) for chunk in chunked.chunks if len(chunk)]
    return _native.ArrowColumn(key, chunks)


def _is_datasets_dataset(value: Any) -> bool:
    datasets = sys.modules.get("datasets")
    return datasets is not None and isinstance(value, datasets.Dataset)


def _python_format(dataset: Any) -> bool:
    return dataset.format.get("type") in (None, "python")


def _visible_columns(dataset: Any) -> list[str]:
    """The columns a row of `dataset` holds (its format may show only some)."""
    fmt = dataset.format
    columns = fmt.get("columns")
    if columns is None or fmt.get("output_all_columns"):
        return list(dataset.column_names)
    return [c for c in dataset.column_names if c in columns]


def readable_columns(dataset: Any) -> list[str]:
    """The columns of `dataset` the Arrow path reads: numbers and flat lists of numbers."""
    table = dataset.data.table
    return [c for c in _visible_columns(dataset) if _column_kind(table.schema.field(c).type)]


class ArrowBatches:
    """A map-style dataset over a `datasets.Dataset` whose batches stay in Arrow storage.

    ``DataLoader(ArrowBatches(dataset), batch_size=32, collate_fn=DataCollatorWithPadding(tok))``
    gives the same batches as ``DataLoader(dataset, ...)`` with the same collator, but the rows
    are never turned into Python objects: each batch is gathered and padded in Rust straight
    from the Arrow buffers. `fastcollate`'s `pad`, `DataCollatorWithPadding`,
    `default_data_collator` and `DefaultDataCollator` take this path, and so do its
    `DataCollatorForTokenClassification`, `DataCollatorForSeq2Seq`,
    `DataCollatorWithFlattening` and `DataCollatorForLanguageModeling` (falling back to the
    rows only where those might differ: seq2seq labels with nulls, flattening of float ids or
    of a batch the row path rejects); other collators get the rows as usual from
    `ArrowBatch.rows()` or by iterating the batch.

    `columns` are the columns a row holds, in that order; by default every column of numbers
    or flat lists of numbers that the dataset's format shows, in the dataset's order, which
    leaves out text columns as Trainer's `remove_unused_columns` would (the model takes token
    ids, not text). The dataset must have the default (Python) format; rows with nulls are
    rejected with an error naming the column and row. Works with `num_workers > 0`, fork or
    spawn: the Arrow views are made lazily in each process.
    """

    def __init__(self, dataset: Any, columns: list[str] | None = None):
        if not _is_datasets_dataset(dataset):
            raise TypeError(
                f"ArrowBatches wraps a datasets.Dataset, not a {type(dataset).__name__}"
            )
        if not _python_format(dataset):
            raise ValueError(
                f"ArrowBatches reads datasets with the default (Python) format; this one is "
                f"formatted as {dataset.format['type']!r}, whose rows fastcollate's collators "
                "would see as tensors. Use dataset.with_format(None), or a plain DataLoader."
            )
        table = dataset.data.table
        if columns is None:
            columns = readable_columns(dataset)
        else:
            columns = list(columns)
            for column in columns:
                if column not in table.column_names:
                    raise ValueError(
                        f"the dataset has no column '{column}'; its columns are "
                        f"{list(dataset.column_names)}"
                    )
                arrow_type = table.schema.field(column).type
                if _column_kind(arrow_type) is None:
                    raise TypeError(
                        f"column '{column}' holds {arrow_type}; the Arrow path reads numbers "
                        "(integers, floats, bools) and flat lists of numbers: leave it out of "
                        "columns="
                    )
            if len(set(columns)) != len(columns):
                raise ValueError(f"columns= names a column twice: {columns}")
        if not columns:
            raise ValueError(
                "the dataset has no column of numbers or lists of numbers to collate; "
                f"its columns are {list(dataset.column_names)}"
            )
        self.dataset = dataset
        self.columns = columns
        self._cache: dict[str, Any] = {}

    # -- map-style dataset ------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: Any) -> Any:
        """A row (or rows, for a slice or list) as `datasets` gives it, with `columns` only."""
        return self._rows_dataset()[index]

    def __getitems__(self, indices: list[int]) -> ArrowBatch:
        """What DataLoader asks for a batch: a handle that the collator turns into arrays."""
        return ArrowBatch(self, indices)

    @property
    def column_names(self) -> list[str]:
        return list(self.columns)

    def __repr__(self) -> str:
        return f"ArrowBatches(rows={len(self)}, columns={self.columns})"

    # -- per-process state ------------------------------------------------------------------

    def __getstate__(self) -> dict:
        # The numpy views are rebuilt in each process; only the dataset travels.
        return {"dataset": self.dataset, "columns": self.columns}

    def __setstate__(self, state: dict) -> None:
        self.dataset = state["dataset"]
        self.columns = state["columns"]
        self._cache = {}

    def _rows_dataset(self) -> Any:
        rows = self._cache.get("rows")
        if rows is None:
            rows = self.dataset.select_columns(self.columns).with_format(None)
            self._cache["rows"] = rows
        return rows

    def native_columns(self) -> tuple[list, Any]:
        """The native ArrowColumn of each column and of the indices mapping (None when the
        dataset has none), built on first use in this process."""
        native = self._cache.get("native")
        if native is None:
            table = self.dataset.data.table
            columns = [_native_column(c, table.column(c)) for c in self.columns]
            indices = self.dataset._indices
            index_map = (
                _native_column("indices", indices.table.column(0)) if indices is not None else None
            )
            native = self._cache["native"] = (columns, index_map)
        return native


class ArrowBatch:
    """A batch that has not left Arrow storage: the `ArrowBatches` it comes from and the
    requested indices. fastcollate's collators collate it natively; anything else can use it as
    a sequence of rows (`len`, indexing, iteration) or call `rows()`."""

    __slots__ = ("source", "indices", "_first")

    def __init__(self, source: ArrowBatches, indices: Any):
        self.source = source
        self.indices = list(indices)
        self._first = None

    @property
    def columns(self) -> list[str]:
        return self.source.columns

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self.source[j] for j in self.indices[i]]
        if i == 0:
            # default_data_collator looks at the first row twice.
            if self._first is None:
                self._first = self.source[self.indices[0]]
            return self._first
        return self.source[self.indices[i]]

    def __iter__(self):
        return iter(self.rows())

    def rows(self) -> list[dict]:
        """The batch as Python rows, as `datasets` gives them (the row path)."""
        return self.source._rows_dataset().__getitems__(self.indices)

    def require(self, key: str) -> ArrowBatch:
        """Raises the error `pad` raises for rows without `key`."""
        if key not in self.source.columns:
            raise missing_main_input(key, self.source.columns)
        return self

    def collate(
        self,
        groups: list,
        *,
        float32: bool,
        allow_ragged: bool = False,
        dtypes: dict | None = None,
        keys: list | None = None,
        keep_arrays: bool = False,
    ) -> dict:
        """`_native.collate` for these rows: same groups, options and output (`keep_arrays`
        changes nothing: Arrow rows hold no numpy or torch values)."""
        del keep_arrays
        columns, index_map = self.source.native_columns()
        return _native.collate_arrow(
            columns,
            index_map,
            self.indices,
            groups,
            float32=float32,
            allow_ragged=allow_ragged,
            dtypes=dtypes,
            keys=keys,
        )

    def __reduce__(self):
        return (ArrowBatch, (self.source, self.indices))

    def __repr__(self) -> str:
        return f"ArrowBatch(indices={self.indices}, columns={self.source.columns})"


def accepts_arrow_batches(data_collator: Any) -> bool:
    """Whether `data_collator` collates an ArrowBatch natively: fastcollate's collators say so
    with an `accepts_arrow_batches = True` attribute (false for subclasses that override how
    a batch is read), and so may any other object."""
    return getattr(data_collator, "accepts_arrow_batches", False) is True


def wrap_for_trainer(dataset: Any, data_collator: Any) -> Any:
    """The dataset a Trainer should hand its DataLoader: `ArrowBatches(dataset)` when the
    collator takes Arrow batches and every column a row holds can be read from Arrow (so the
    batches are exactly those of the row path), else `dataset` unchanged."""
    if not (_is_datasets_dataset(dataset) and _python_format(dataset)):
        return dataset
    if not accepts_arrow_batches(data_collator):
        return dataset
    visible = _visible_columns(dataset)
    if not visible or readable_columns(dataset) != visible:
        return dataset
    return ArrowBatches(dataset, visible)


def unwrap(dataset: Any) -> Any:
    """The datasets.Dataset inside an ArrowBatches (for samplers that read lengths from it)."""
    return dataset.dataset if isinstance(dataset, ArrowBatches) else dataset
