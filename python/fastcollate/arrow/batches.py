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

from collections.abc import Iterator
from typing import Any, cast

from .. import _native
from .._internal.datasets import is_datasets_dataset
from .._internal.rows import missing_main_input
from .columns import column_kind, native_column, python_format, readable_columns


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
        if not is_datasets_dataset(dataset):
            raise TypeError(
                f"ArrowBatches wraps a datasets.Dataset, not a {type(dataset).__name__}"
            )
        if not python_format(dataset):
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
                if column_kind(arrow_type) is None:
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

    def __getstate__(self) -> dict[str, Any]:
        # The numpy views are rebuilt in each process; only the dataset travels.
        return {"dataset": self.dataset, "columns": self.columns}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.dataset = state["dataset"]
        self.columns = state["columns"]
        self._cache = {}

    def rows(self, indices: list[int]) -> list[dict[str, Any]]:
        """The rows at `indices`, as `datasets` gives them (the row path)."""
        return cast(list[dict[str, Any]], self._rows_dataset().__getitems__(indices))

    @property
    def schema(self) -> Any:
        """The Arrow schema of the dataset's table."""
        return self.dataset.data.table.schema

    def null_count(self, column: str) -> int:
        """How many rows of the dataset's `column` are null."""
        return cast(int, self.dataset.data.table.column(column).null_count)

    def _rows_dataset(self) -> Any:
        rows = self._cache.get("rows")
        if rows is None:
            rows = self.dataset.select_columns(self.columns).with_format(None)
            self._cache["rows"] = rows
        return rows

    def native_columns(self) -> tuple[list[Any], Any]:
        """The native ArrowColumn of each column and of the indices mapping (None when the
        dataset has none), built on first use in this process."""
        native = self._cache.get("native")
        if native is None:
            table = self.dataset.data.table
            columns = [native_column(c, table.column(c)) for c in self.columns]
            indices = self.dataset._indices
            index_map = (
                native_column("indices", indices.table.column(0)) if indices is not None else None
            )
            native = self._cache["native"] = (columns, index_map)
        return native


class ArrowBatch:
    """A batch that has not left Arrow storage: where it comes from (an `ArrowBatches`, or a
    record batch given to `fastcollate.collate_arrow`) and the requested indices.
    fastcollate's collators collate it natively; anything else can use it as a sequence of
    rows (`len`, indexing, iteration) or call `rows()`."""

    __slots__ = ("source", "indices", "_first")

    def __init__(self, source: Any, indices: Any):
        self.source = source
        self.indices = list(indices)
        self._first = None

    @property
    def columns(self) -> list[str]:
        return cast(list[str], self.source.columns)

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

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.rows())

    def rows(self) -> list[dict[str, Any]]:
        """The batch as Python rows, as `datasets` gives them (the row path)."""
        return cast(list[dict[str, Any]], self.source.rows(self.indices))

    def require(self, key: str) -> ArrowBatch:
        """Raises the error `pad` raises for rows without `key` (row 0 is the first it names)."""
        if key not in self.source.columns:
            raise missing_main_input(key, self.source.columns, "row 0")
        return self

    def collate(
        self,
        groups: list[Any],
        *,
        float32: bool,
        allow_ragged: bool = False,
        dtypes: dict[str, Any] | None = None,
        keys: list[Any] | None = None,
        keep_arrays: bool = False,
        output_buffer: Any = None,
    ) -> dict[str, Any]:
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
            output_buffer=output_buffer,
        )

    def collate_planned(self, plan: Any) -> Any:
        """`collate_planned` for these rows: `collate` with a `_native.CollatePlan`'s groups
        and `float32`, each output through its `to_tensor`, the batch finished as the plan
        says (see `_native.collate_arrow_planned`)."""
        columns, index_map = self.source.native_columns()
        return _native.collate_arrow_planned(columns, index_map, self.indices, plan)

    def __reduce__(self) -> tuple[Any, ...]:
        return (ArrowBatch, (self.source, self.indices))

    def __repr__(self) -> str:
        return f"ArrowBatch(indices={self.indices}, columns={self.source.columns})"


def accepts_arrow_batches(data_collator: Any) -> bool:
    """Whether `data_collator` collates an ArrowBatch natively: fastcollate's collators say so
    with an `accepts_arrow_batches = True` attribute (false for subclasses that override how
    a batch is read), and so may any other object."""
    return getattr(data_collator, "accepts_arrow_batches", False) is True


