"""What a Trainer's DataLoader reads: `ArrowBatches(dataset)` where the collator takes Arrow
batches and every column a row holds reads from Arrow (the same batches as the rows give), else
the dataset itself. A dataset formatted as torch tensors (`set_format("torch")`) is read from
Arrow too where its tensor rows are what its Python rows are to the collators: integer columns,
which datasets' torch formatter makes int64 tensors, as the collators make Python ints.
`ArrowDataLoaderMixin` puts this in any `transformers.Trainer` subclass
(`fastcollate.trl.SFTTrainer` is TRL's SFTTrainer with it)."""

from __future__ import annotations

from typing import Any

from .._internal.datasets import is_datasets_dataset
from .batches import ArrowBatches, accepts_arrow_batches
from .columns import column_kind, python_format, readable_columns, visible_columns
from .record_batches import _has_nulls


def wrap_for_trainer(dataset: Any, data_collator: Any) -> Any:
    """The dataset a Trainer should hand its DataLoader: `ArrowBatches(dataset)` when the
    collator takes Arrow batches and every column a row holds can be read from Arrow (so the
    batches are exactly those of the row path), else `dataset` unchanged. A torch-formatted
    dataset whose rows collate as its Python rows do (`_tensor_rows_are_python_rows`) is read
    through an unformatted view of the same table; the caller's dataset is left as it is."""
    if not (is_datasets_dataset(dataset) and accepts_arrow_batches(data_collator)):
        return dataset
    python = python_format(dataset)
    if not (python or _tensor_rows_are_python_rows(dataset)):
        return dataset
    visible = visible_columns(dataset)
    if not visible or readable_columns(dataset) != visible:
        return dataset
    return ArrowBatches(dataset if python else dataset.with_format(None), visible)


def _tensor_rows_are_python_rows(dataset: Any) -> bool:
    """Whether `dataset` is formatted as torch tensors whose rows fastcollate's collators
    collate as they collate its Python rows: the plain torch format (no dtype or other
    tensor arguments), every column a row holds integers or lists of integers that the
    formatter makes int64 (uint64 excepted: no int64 holds it) and no null anywhere in them.
    Floats (float32 tensors, where Python floats may be float64) and booleans stay tensors."""
    import pyarrow as pa

    fmt = dataset.format
    if fmt.get("type") != "torch" or fmt.get("format_kwargs"):
        return False
    table = dataset.data.table
    for column in visible_columns(dataset):
        arrow_type = table.schema.field(column).type
        kind = column_kind(arrow_type)
        values = arrow_type.value_type if kind == "sequence" else arrow_type
        if kind is None or not pa.types.is_integer(values) or pa.types.is_uint64(values):
            return False
        if _has_nulls(table.column(column)):
            return False
    return True


def unwrap(dataset: Any) -> Any:
    """The datasets.Dataset inside an ArrowBatches (for samplers that read lengths from it)."""
    return dataset.dataset if isinstance(dataset, ArrowBatches) else dataset


class ArrowDataLoaderMixin:
    """Mixed in before a `transformers.Trainer` subclass: after the Trainer drops the columns
    the model does not take (`remove_unused_columns`), a `datasets.Dataset` is handed to the
    DataLoader as `ArrowBatches` when `wrap_for_trainer` allows it, so the collator gets
    `ArrowBatch` handles and pads straight from the Arrow buffers. Samplers still see the
    `datasets.Dataset` (transformers' length grouping reads its columns). Everything else is
    the Trainer's own."""

    data_collator: Any

    def _remove_unused_columns(self, dataset: Any, description: Any = None) -> Any:
        dataset = super()._remove_unused_columns(  # type: ignore[misc]
            dataset, description=description
        )
        return wrap_for_trainer(dataset, self.data_collator)

    def _get_train_sampler(self, train_dataset: Any = None) -> Any:
        return super()._get_train_sampler(unwrap(train_dataset))  # type: ignore[misc]

    def _get_eval_sampler(self, eval_dataset: Any) -> Any:
        return super()._get_eval_sampler(unwrap(eval_dataset))  # type: ignore[misc]
