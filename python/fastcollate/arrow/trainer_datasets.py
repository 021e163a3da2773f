"""What a Trainer's DataLoader reads: `ArrowBatches(dataset)` where the collator takes Arrow
batches and every column a row holds reads from Arrow (the same batches as the rows give), else
the dataset itself. `ArrowDataLoaderMixin` puts this in any `transformers.Trainer` subclass
(`fastcollate.trl.SFTTrainer` is TRL's SFTTrainer with it)."""

from __future__ import annotations

from typing import Any

from .._internal.datasets import is_datasets_dataset
from .batches import ArrowBatches, accepts_arrow_batches
from .columns import python_format, readable_columns, visible_columns


def wrap_for_trainer(dataset: Any, data_collator: Any) -> Any:
    """The dataset a Trainer should hand its DataLoader: `ArrowBatches(dataset)` when the
    collator takes Arrow batches and every column a row holds can be read from Arrow (so the
    batches are exactly those of the row path), else `dataset` unchanged."""
    if not (is_datasets_dataset(dataset) and python_format(dataset)):
        return dataset
    if not accepts_arrow_batches(data_collator):
        return dataset
    visible = visible_columns(dataset)
    if not visible or readable_columns(dataset) != visible:
        return dataset
    return ArrowBatches(dataset, visible)


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
