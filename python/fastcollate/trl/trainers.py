"""`SFTTrainer`: TRL's SFTTrainer whose DataLoaders hand fastcollate's collator `ArrowBatch`
handles, so each batch is padded straight from the prepared dataset's Arrow buffers."""

from __future__ import annotations

from .._internal.patching import original
from ..arrow.trainer_datasets import ArrowDataLoaderMixin

# TRL's own class, even when `patch_trl()` has put this module's in TRL's namespace.
_TRLSFTTrainer = original("trl.trainer.sft_trainer", "SFTTrainer")


class SFTTrainer(ArrowDataLoaderMixin, _TRLSFTTrainer):  # type: ignore[misc, valid-type]
    """`trl.SFTTrainer` (same arguments, same training) whose train and eval DataLoaders read
    batches straight from Arrow: after TRL prepares the dataset and drops the columns the model
    does not take (`input_ids`, `labels`, `seq_lengths` are kept), the DataLoader's batch
    request returns an `ArrowBatch` that the collator pads in Rust without building Python rows
    — padded, padding-free and packed alike.

    It takes that path only where the batches are exactly the row path's: the collator is
    fastcollate's (`patch_trl()` makes TRL build it; a collator passed in must take Arrow
    batches), the dataset is a `datasets.Dataset` in the default format, and every column it
    keeps holds numbers or flat lists of numbers. Anything else (TRL's own collator, a vision
    dataset, `remove_unused_columns=False` with text columns left, an `IterableDataset`)
    gets the rows as `trl.SFTTrainer` gives them."""
