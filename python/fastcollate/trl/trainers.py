"""TRL's SFT, DPO, reward and KTO trainers whose DataLoaders hand fastcollate's collators
`ArrowBatch` handles, so each batch is padded straight from the prepared dataset's Arrow
buffers. Each is TRL's class with `ArrowDataLoaderMixin` (the same Arrow path as
`fastcollate.Trainer`) and nothing else."""

from __future__ import annotations

from .._internal.patching import original
from ..arrow.trainer_datasets import ArrowDataLoaderMixin

# TRL's own classes, even when `patch_trl()` has put this module's in TRL's namespace.
_TRLSFTTrainer = original("trl.trainer.sft_trainer", "SFTTrainer")
_TRLDPOTrainer = original("trl.trainer.dpo_trainer", "DPOTrainer")
_TRLRewardTrainer = original("trl.trainer.reward_trainer", "RewardTrainer")
_TRLKTOTrainer = original("trl.trainer.kto_trainer", "KTOTrainer")

class SFTTrainer(ArrowDataLoaderMixin, _TRLSFTTrainer):  # type: ignore[misc, valid-type]
    """`trl.SFTTrainer` (same arguments, same training) whose train and eval DataLoaders read
    batches straight from Arrow: after TRL prepares the dataset (`input_ids`, `labels`, and
    `seq_lengths` when packed), `fastcollate.trl.DataCollatorForLanguageModeling` is handed
    `ArrowBatch` handles and pads them in Rust without building Python rows, padded,
    padding-free and packed alike.

    It takes that path only where the batches are exactly the row path's: the collator takes
    Arrow batches (fastcollate's, which `patch_trl()` makes TRL build; not TRL's own), the
    dataset is a `datasets.Dataset` in the default format, and every column it keeps after
    `remove_unused_columns` holds numbers or flat lists of numbers. Anything else (TRL's own
    collator, a vision dataset, text columns kept by `remove_unused_columns=False`, an
    `IterableDataset`) gets the rows as TRL's trainer gives them. Samplers still see the
    `datasets.Dataset`."""


class DPOTrainer(ArrowDataLoaderMixin, _TRLDPOTrainer):  # type: ignore[misc, valid-type]
    """`trl.DPOTrainer` (same arguments, same training) whose train and eval DataLoaders read
    batches straight from Arrow: `fastcollate.trl.DataCollatorForPreference` reads
    `prompt_ids`, `chosen_ids`, `rejected_ids` and the reference log-probabilities from the
    `ArrowBatch` it is handed, without Python rows. Reference log-probabilities that TRL
    precomputes (`precompute_ref_log_probs`) are computed over rows, as in TRL. When the Arrow
    path is taken: as for `SFTTrainer`."""


class RewardTrainer(ArrowDataLoaderMixin, _TRLRewardTrainer):  # type: ignore[misc, valid-type]
    """`trl.RewardTrainer` (same arguments, same training) whose train and eval DataLoaders
    read batches straight from Arrow: `fastcollate.trl.RewardDataCollatorForPreference` reads
    `chosen_ids`, `rejected_ids` and `margin` from the `ArrowBatch` it is handed, without
    Python rows. When the Arrow path is taken: as for `SFTTrainer`."""


class KTOTrainer(ArrowDataLoaderMixin, _TRLKTOTrainer):  # type: ignore[misc, valid-type]
    """`trl.KTOTrainer` (same arguments, same training) whose train and eval DataLoaders read
    batches straight from Arrow: `fastcollate.trl.DataCollatorForUnpairedPreference` reads
    `prompt_ids`, `completion_ids`, `KL_completion_ids`, `label` and the reference
    log-probabilities from the `ArrowBatch` it is handed, without Python rows. When the Arrow
    path is taken: as for `SFTTrainer`."""
