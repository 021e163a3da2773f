"""`prepare_sft_trainer_dataset`: what `patch_trl()` puts in place of TRL 1.16's
`SFTTrainer._prepare_dataset`, so an unchanged SFTTrainer script prepares its datasets with
`prepare_tokenized_sft_dataset` where the result is provably TRL's.

TRL's method does, in order: formatting function, conversion to ChatML, EOS, tokenization (all
per-row Python that calls the tokenizer or user code), then labels from the masks, truncation
and filtering (per-row Python over lists of ints), packing and shuffling. The second half is
`prepare_tokenized_sft_dataset`, which gives the same dataset (rows, column order, features,
format). So:

- a `datasets.Dataset` that already holds `input_ids`: all of it is ours;
- a raw `datasets.Dataset`: TRL's method tokenizes and builds the labels (labels are built
  inside TRL's method right after tokenizing, with no place between to step in), with
  truncation, packing and shuffling turned off; the truncation, filtering, packing and
  shuffling are ours, on the labelled dataset (`prepare_tokenized_sft_dataset` keeps a
  `labels` column as it is);
- everything else stays TRL's: an `IterableDataset` (no Arrow table to work on), a dataset with
  a custom transform (TRL's error), and a tokenized dataset passed with a formatting function
  (TRL warns that it ignores the function).
"""

from __future__ import annotations

import copy
from typing import Any

import datasets

from .._internal.patching import original
from .._internal.upstream import SFT_TRAINER_MODULE, SFT_TRAINER_PREPARE_DATASET
from ..preparation.sft_dataset import prepare_tokenized_sft_dataset


def _trl_prepare_dataset() -> Any:
    return original(SFT_TRAINER_MODULE, SFT_TRAINER_PREPARE_DATASET)


def prepare_sft_trainer_dataset(
    trainer: Any,
    dataset: Any,
    processing_class: Any,
    args: Any,
    packing: bool,
    formatting_func: Any,
    dataset_name: str,
) -> Any:
    """`SFTTrainer._prepare_dataset` under `patch_trl()`: the same arguments and result as
    TRL's method (the module docstring says which part is fastcollate's)."""
    trl_prepare = _trl_prepare_dataset()
    if not isinstance(dataset, datasets.Dataset) or dataset.format["type"] == "custom":
        return trl_prepare(
            trainer, dataset, processing_class, args, packing, formatting_func, dataset_name
        )
    tokenized = "input_ids" in dataset.column_names
    if tokenized and formatting_func is not None:
        return trl_prepare(
            trainer, dataset, processing_class, args, packing, formatting_func, dataset_name
        )
    if packing and args.max_length is None:
        # TRL's error, raised before any work.
        raise ValueError("When packing is enabled, `max_length` can't be `None`.")
    if not tokenized:
        # TRL's tokenization and labels only: a shallow copy of the config (the caller's is
        # left alone) with truncation and shuffling off, and no packing.
        labelling = copy.copy(args)
        labelling.max_length = None
        labelling.shuffle_dataset = False
        dataset = trl_prepare(
            trainer, dataset, processing_class, labelling, False, formatting_func, dataset_name
        )
    return prepare_tokenized_sft_dataset(
        dataset,
        completion_only_loss=trainer.completion_only_loss,
        max_length=args.max_length,
        truncation_mode=args.truncation_mode,
        packing=packing,
        packing_strategy=args.packing_strategy,
        shuffle_dataset=args.shuffle_dataset,
        seed=args.seed,
        dataset_num_proc=args.dataset_num_proc,
    )
