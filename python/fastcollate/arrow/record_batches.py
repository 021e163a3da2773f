"""Collating Arrow record batches that come from anywhere: `collate_arrow(batch, collator)`.

Streaming readers hand out `pyarrow.RecordBatch`es or `pyarrow.Table`s (Parquet through
`pyarrow.parquet.ParquetFile.iter_batches`, `datasets` streaming with `.with_format("arrow")`,
Ray Data with `batch_format="pyarrow"`). Their rows need not become Python objects: the batch's
columns are turned into numpy views of their Arrow buffers (no copy) and handed, as an
`ArrowBatch`, to the collators that read Arrow natively. The result is what the collator gives
for `batch.to_pylist()`, the row path, which is also what any other collator is given.
"""

from __future__ import annotations

from typing import Any, cast

from .. import _native
from .batches import ArrowBatch, accepts_arrow_batches
from .columns import _chunk, column_kind


class _RecordBatchSource:
    """One record batch or table as the source of an `ArrowBatch`: the native columns, and
    rows as `to_pylist()` gives them for the collators that look at a row."""

    __slots__ = ("table", "columns", "_native")

    def __init__(self, table: Any):
        self.table = table
        self.columns = list(table.column_names)
        self._native: tuple[list[Any], None] | None = None

    def native_columns(self) -> tuple[list[Any], None]:
        if self._native is None:
            columns = [_native_column(name, self.table.column(name)) for name in self.columns]
            self._native = (columns, None)
        return self._native

    def rows(self, indices: list[int]) -> list[dict[str, Any]]:
        if indices == list(range(self.table.num_rows)):
            return cast(list[dict[str, Any]], self.table.to_pylist())
        return cast(list[dict[str, Any]], self.table.take(indices).to_pylist())

    def __getitem__(self, index: int) -> dict[str, Any]:
        return cast(dict[str, Any], self.table.slice(index, 1).to_pylist()[0])

    @property
    def schema(self) -> Any:
        return self.table.schema

    def null_count(self, column: str) -> int:
        return cast(int, self.table.column(column).null_count)


def _native_column(name: str, column: Any) -> Any:
    # A RecordBatch's column is one array; a Table's is a ChunkedArray.
    chunks = getattr(column, "chunks", None)
    if chunks is None:
        chunks = [column]
    return _native.ArrowColumn(name, [_chunk(chunk) for chunk in chunks if len(chunk)])


def _as_table_like(batch: Any) -> Any:
    """A `pyarrow.RecordBatch` or `pyarrow.Table` as it is; anything else is a TypeError."""
    try:
        import pyarrow as pa
    except ImportError:  # pragma: no cover - depends on the environment
        raise TypeError(
            f"collate_arrow takes a pyarrow.RecordBatch or pyarrow.Table, not a "
            f"{type(batch).__name__} (and pyarrow is not installed)"
        ) from None
    if isinstance(batch, (pa.RecordBatch, pa.Table)):
        return batch
    raise TypeError(
        f"collate_arrow takes a pyarrow.RecordBatch or pyarrow.Table, not a "
        f"{type(batch).__name__}; give a list of rows to the collator itself"
    )


def _has_nulls(column: Any) -> bool:
    """Whether a row is null, or a value inside a row's list (within the batch's slice)."""
    if column.null_count:
        return True
    chunks = getattr(column, "chunks", None)
    for chunk in [column] if chunks is None else chunks:
        values = getattr(chunk, "values", None)
        # The child's count covers values outside a slice too: only then look closer.
        if values is not None and values.null_count and chunk.flatten().null_count:
            return True
    return False


def reads_natively(table: Any) -> bool:
    """Whether every column of `table` is one the Arrow path reads (numbers, flat lists of
    numbers) and holds no null: otherwise the rows are what the collator is given."""
    for name in table.column_names:
        column = table.column(name)
        if column_kind(column.type) is None or _has_nulls(column):
            return False
    return True


def collate_arrow(batch: Any, collator: Any, columns: list[str] | None = None) -> Any:
    """``collator(rows)`` for the rows of a `pyarrow.RecordBatch` or `pyarrow.Table`, read
    straight from the Arrow buffers when the collator can.

    The output equals ``collator(batch.to_pylist())`` (keys, values, shapes, dtypes) in every
    case. fastcollate's collators that read Arrow (`DataCollatorWithPadding`, `pad` through
    it, `default_data_collator`, `DefaultDataCollator`, `DataCollatorForTokenClassification`,
    `DataCollatorForSeq2Seq`, `DataCollatorWithFlattening`, `DataCollatorForLanguageModeling`
    and `fastcollate.trl.DataCollatorForLanguageModeling`) gather and pad the rows in Rust from
    the buffers, with no Python object per row. The batch goes through
    ``batch.to_pylist()`` instead -- the same rows, the same result, only slower -- when:

    - the collator does not read Arrow (transformers' collators, any other callable, a user
      subclass that overrides how a batch is read);
    - a column holds something other than numbers or flat lists of numbers (text, nested
      lists, structs): the rows decide what happens to it, as they would without Arrow;
    - a column holds a null, as a row or inside a row's list.

    `columns` keeps only those columns (in that order), as ``batch.select(columns)`` would:
    leave out text columns the model does not take to stay on the Arrow path. A chunked table
    and a sliced batch (`offset != 0`) are read in place.
    """
    table = _as_table_like(batch)
    if columns is not None:
        columns = list(columns)
        missing = [c for c in columns if c not in table.column_names]
        if missing:
            raise ValueError(
                f"columns= names {missing}, which the batch does not have; its columns are "
                f"{table.column_names}"
            )
        if len(set(columns)) != len(columns):
            raise ValueError(f"columns= names a column twice: {columns}")
        table = table.select(columns)
    if (
        table.num_rows
        and accepts_arrow_batches(collator)
        # Two columns of one name: a row keeps the last; the rows say what that gives.
        and len(set(table.column_names)) == len(table.column_names)
        and reads_natively(table)
    ):
        return collator(ArrowBatch(_RecordBatchSource(table), range(table.num_rows)))
    return collator(table.to_pylist())
