"""`fastcollate.Trainer`: transformers' Trainer with fastcollate's default collators and fast
length grouping. Everything else is transformers' own loop."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import json
import os
import warnings
from typing import TYPE_CHECKING, Any, cast

import torch
import transformers
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, has_length

from .._internal.datasets import is_datasets_dataset, refuse_split_dict
from .._internal.patching import original
from .._internal.upstream import TRAINER_COLLATOR_WITH_REMOVED_COLUMNS, TRAINER_OUTPUT_DIR
from ..arrow.trainer_datasets import ArrowDataLoaderMixin, unwrap
from ..collators import DataCollatorWithFlattening, DataCollatorWithPadding, default_data_collator
from ..sampling.lengths import sequence_lengths
from ..sampling.samplers import LengthGroupedSampler
from .accelerate_loader import prepare_rank_aware_loader
from .batch_places import EVAL, TEST, TRAIN, LoaderPlaces, PlacedCollate
from .cpu_batches import take_over_cpu_placement
from .trainer_sampling import (
    CutToTokenBudget,
    grouped_stream,
    is_packable_stream,
    is_packed,
    packed_sampler,
    packed_stream,
    rebalance_sampler,
    stream_warning,
)


def default_collator(processing_class: Any) -> Any:
    """The collator transformers.Trainer picks when none is given, fastcollate's where it has
    one: padding with a tokenizer, `default_data_collator` otherwise. A feature extractor keeps
    transformers' DataCollatorWithPadding (fastcollate pads token sequences only)."""
    from transformers import PreTrainedTokenizerBase
    from transformers.feature_extraction_sequence_utils import SequenceFeatureExtractor

    if isinstance(processing_class, PreTrainedTokenizerBase):
        return DataCollatorWithPadding(processing_class)
    if isinstance(processing_class, SequenceFeatureExtractor):
        return original("transformers.data.data_collator", "DataCollatorWithPadding")(
            processing_class
        )
    return default_data_collator


def pins_in_collator(args: Any, data_collator: Any, cuda_available: bool) -> bool:
    """Whether the collator should return pinned batches in place of the DataLoader pinning
    them: `dataloader_pin_memory` on, a GPU present, batches collated in the main process
    (`dataloader_num_workers=0`; a worker's batch arrives unpinned) and a collator with a
    `pin_memory` field (fastcollate's DataCollatorWithPadding) returning torch tensors."""
    return (
        bool(args.dataloader_pin_memory)
        and cuda_available
        and args.dataloader_num_workers == 0
        and dataclasses.is_dataclass(data_collator)
        and getattr(data_collator, "pin_memory", None) is False
        and getattr(data_collator, "return_tensors", None) == "pt"
    )


def has_accelerator() -> bool:
    """Whether torch has a device to pin host memory for (`DataLoader(pin_memory=True)` pins
    only then, and warns otherwise)."""
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is None:  # torch before 2.6
        return torch.cuda.is_available()
    return cast(bool, accelerator.is_available())


_TRAINER_SIGNATURE = inspect.signature(transformers.Trainer.__init__)


# Written into each checkpoint: the epoch the training loop was in and how many of its batches
# were trained, which transformers cannot recover from global_step on a stream.
STREAM_POSITION_NAME = "fastcollate_stream_position.json"


class StreamPosition(transformers.TrainerCallback):
    """Counts the batches trained in the current epoch (one substep or step per batch) and
    writes the epoch and that count into each checkpoint the trainer saves."""

    def __init__(self, trainer: transformers.Trainer):
        self.trainer = trainer
        self.epoch = 0
        self.batches = 0

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.batches += 1

    def on_substep_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.batches += 1

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        directory = os.path.join(
            getattr(self.trainer, TRAINER_OUTPUT_DIR)(None),
            f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}",
        )
        if state.is_world_process_zero and os.path.isdir(directory):
            with open(os.path.join(directory, STREAM_POSITION_NAME), "w") as f:
                json.dump({"epoch": self.epoch, "batches": self.batches}, f)


def saved_stream_position(checkpoint: str) -> tuple[int, int] | None:
    """(epoch, batches trained in it) saved in `checkpoint` by StreamPosition, or None."""
    path = os.path.join(checkpoint, STREAM_POSITION_NAME)
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        saved = json.load(f)
    return int(saved["epoch"]), int(saved["batches"])


# The mixin's base for type checking: the Trainer it is mixed into (its attributes and the
# methods it extends); at runtime the mixin has no base of its own beyond ArrowDataLoaderMixin.
if TYPE_CHECKING:
    _TrainerBase = transformers.Trainer
else:
    _TrainerBase = object


class ArrowTrainerMixin(ArrowDataLoaderMixin, _TrainerBase):
    """fastcollate's overrides of transformers' Trainer, for `transformers.Trainer` and its
    subclasses (`class X(ArrowTrainerMixin, transformers.Seq2SeqTrainer)`): fastcollate's
    default collators, batches read straight from Arrow (`ArrowDataLoaderMixin`, which TRL's
    trainers in `fastcollate.trl` use too), lengths read from Arrow and grouped
    in Rust, packed and length-grouped streams, and the collator's `set_epoch` at each epoch."""

    def __init__(self, *args: Any, **kwargs: Any):
        bound = _TRAINER_SIGNATURE.bind(self, *args, **kwargs)
        collator_given = bound.arguments.get("data_collator") is not None
        # transformers keeps a DatasetDict and fails at train() with datasets' KeyError; an
        # eval_dataset dict (a DatasetDict among them) is evaluated split by split, as there.
        refuse_split_dict("train_dataset", bound.arguments.get("train_dataset"))
        super().__init__(*args, **kwargs)
        if not collator_given:
            self.data_collator = default_collator(self.processing_class)
            if is_packed(self.args):
                self.data_collator = DataCollatorWithFlattening()
        if is_packed(self.args) and getattr(self.args, "packing_truncation", False):
            self.data_collator = CutToTokenBudget(
                # Packed: fastcollate's TrainingArguments, which has the field.
                self.data_collator, cast(Any, self.args).max_tokens_per_batch
            )
        self._stream_position = StreamPosition(self)
        # The training epoch and the place of each loader's batches, told to its collate_fn.
        self._loader_places = LoaderPlaces()
        self.add_callback(self._stream_position)
        # A stream the sampling strategy cannot serve is reported now, not at train().
        self._streams_warned: set[tuple[bool, str]] = set()
        self._check_stream(self.train_dataset, training=True)
        evals = self.eval_dataset
        for dataset in evals.values() if isinstance(evals, dict) else [evals]:
            self._check_stream(dataset, training=False)

    # help(), IDEs and inspect show transformers' arguments, which __init__ passes on as they are.
    __init__.__signature__ = _TRAINER_SIGNATURE  # type: ignore[attr-defined]

    def _init_training_state(self, max_steps: int, num_update_steps_per_epoch: int,
                             num_train_epochs: int, resume_from_checkpoint: Any,
                             trial: Any) -> tuple[int, int]:
        # transformers resumes at epoch global_step // steps per epoch, which on a stream (no
        # length: max_steps) is always 0; the checkpoint says the epoch and batch.
        epochs_trained, batches_trained = super()._init_training_state(
            max_steps, num_update_steps_per_epoch, num_train_epochs, resume_from_checkpoint,
            trial)
        if resume_from_checkpoint is None or has_length(self.train_dataset):
            return epochs_trained, batches_trained
        saved = saved_stream_position(resume_from_checkpoint)
        if saved is None:
            return epochs_trained, batches_trained
        epoch, batches = saved
        return epoch, (0 if self.args.ignore_data_skip else batches)

    def _run_epoch(self, *args: Any, **kwargs: Any) -> Any:
        # The training loop's own epoch: the true one on a stream too, where state.epoch is
        # steps / max_steps.
        epoch = kwargs["epoch"]
        position = self._stream_position
        position.epoch = epoch
        position.batches = 0
        if (epoch == kwargs["epochs_trained"] and kwargs["resume_from_checkpoint"] is not None
                and not self.args.ignore_data_skip):
            position.batches = kwargs["steps_trained_in_current_epoch"]
        # A map-style loader resumed inside an epoch skips its first batches without collating
        # them (accelerate's SkipBatchSampler): its first batch is at position `batches`. An
        # iterable one collates the batches it skips, and counts them.
        loader = kwargs.get("train_dataloader")
        map_style = not isinstance(getattr(loader, "dataset", None),
                                   torch.utils.data.IterableDataset)
        self._loader_places.start_epoch(epoch, position.batches if map_style else 0)
        # fastcollate's DataCollatorForLanguageModeling keys its seeded masks by the epoch; set
        # before the epoch's DataLoader starts its workers.
        set_epoch = getattr(self.data_collator, "set_epoch", None)
        if callable(set_epoch):
            set_epoch(epoch)
        return super()._run_epoch(*args, **kwargs)  # type: ignore[no-untyped-call]  # untyped upstream

    def _check_stream(self, dataset: Any, training: bool) -> None:
        """Raises for a packed stream; warns once per (split, message) for a length strategy
        that a stream does not get (transformers' Trainer only logs it, at info level)."""
        message = stream_warning(self.args, unwrap(dataset), training)
        if message is not None and (training, message) not in self._streams_warned:
            self._streams_warned.add((training, message))
            warnings.warn(message, UserWarning, stacklevel=3)

    def _get_dataloader(self, dataset: Any, *args: Any, **kwargs: Any) -> Any:
        # Every train / eval / test DataLoader goes through here, datasets set after __init__ too.
        self._check_stream(dataset, training=bool(kwargs.get("is_training", False)))
        # With a GPU, the collator returns its batches in pinned memory (one copy after
        # padding), so this DataLoader's own pinning step is turned off. Without an
        # accelerator it is not asked for either: torch would not pin, and would warn so.
        collator = self.data_collator
        used = collator
        in_collator = pins_in_collator(self.args, used, torch.cuda.is_available())
        if in_collator:
            used = dataclasses.replace(used, pin_memory=True)
        # Each loader's batches are collated with their place set: seeded masks are keyed by
        # (loader, epoch, position), so evaluation and prediction leave the training masks as
        # they were, wherever the seeded collator sits inside the collator.
        description = args[0] if args else kwargs.get("description")
        stream = (TRAIN if kwargs.get("is_training", False)
                  else TEST if description == "test" else EVAL)
        used = PlacedCollate(used, stream, self._loader_places,
                             map_style=not isinstance(dataset, torch.utils.data.IterableDataset))
        # The caller's TrainingArguments are left as they are: the DataLoader is built from a
        # shallow copy carrying the change.
        training_args = self.args
        if in_collator or (training_args.dataloader_pin_memory and not has_accelerator()):
            self.args = copy.copy(training_args)
            self.args.dataloader_pin_memory = False
        self.data_collator = used
        try:
            loader = super()._get_dataloader(dataset, *args, **kwargs)
        finally:
            self.data_collator = collator
            self.args = training_args
        # Training on the CPU, a batch of CPU tensors is not walked again by accelerate.
        take_over_cpu_placement(loader, used)
        return loader

    def get_train_dataloader(self) -> Any:
        """transformers' training DataLoader, except for a stream trained packed or grouped by
        length: batches made on the fly, each rank its own."""
        dataset = self.train_dataset
        if dataset is None or not is_packable_stream(dataset):
            return super().get_train_dataloader()
        model_input_names = getattr(self.processing_class, "model_input_names", None)
        column = model_input_names[0] if model_input_names else "input_ids"
        if is_packed(self.args):
            return self._stream_dataloader(packed_stream(self.args, dataset, column))
        if self.args.train_sampling_strategy == "group_by_length":
            return self._stream_dataloader(grouped_stream(self.args, dataset, column))
        return super().get_train_dataloader()

    def _stream_dataloader(self, stream: Any) -> Any:
        """A DataLoader over a `PackedStream` or `LengthGroupedStream` (one list of rows per
        batch, collated by the Trainer's collator), prepared by accelerate without being
        sharded a second time."""
        args = self.args
        placed = PlacedCollate(self.data_collator, TRAIN, self._loader_places, map_style=False)
        loader = torch.utils.data.DataLoader(
            stream,
            batch_size=None,
            collate_fn=getattr(self, TRAINER_COLLATOR_WITH_REMOVED_COLUMNS)(
                placed, description="Training"
            ),
            num_workers=args.dataloader_num_workers,
            pin_memory=bool(args.dataloader_pin_memory) and has_accelerator(),
            persistent_workers=args.dataloader_persistent_workers,
            multiprocessing_context=args.dataloader_multiprocessing_context,
            prefetch_factor=args.dataloader_prefetch_factor,
        )
        prepared = prepare_rank_aware_loader(self.accelerator, loader)
        take_over_cpu_placement(prepared, placed)
        return prepared

    def _dataset_lengths(self, dataset: Any) -> Any:
        # The same sources as transformers: the length column when the dataset has it (after
        # unused columns are removed), else the processing class's main input.
        length_column: str | None = self.args.length_column_name
        if not (is_datasets_dataset(dataset) and length_column in dataset.column_names):
            length_column = None
        model_input_name = (
            # transformers types FeatureExtractionMixin without the attribute its subclasses set.
            self.processing_class.model_input_names[0]  # type: ignore[union-attr]
            if self.processing_class is not None
            else None
        )
        return sequence_lengths(
            dataset,
            column=model_input_name if model_input_name is not None else "input_ids",
            length_column_name=length_column,
        )

    def _get_train_sampler(self, train_dataset: Any = None) -> Any:
        if train_dataset is None:
            train_dataset = self.train_dataset
        train_dataset = unwrap(train_dataset)
        strategy = self.args.train_sampling_strategy
        self._check_stream(train_dataset, training=True)  # packed without lengths raises here
        if train_dataset is not None and has_length(train_dataset):
            # Rank-aware batch samplers over lengths read from Arrow (see trainer_sampling).
            if strategy == "batch_rebalance":
                return rebalance_sampler(self.args, self._dataset_lengths(train_dataset))
            if is_packed(self.args):
                return packed_sampler(self.args, self._dataset_lengths(train_dataset))
        if strategy != "group_by_length" or train_dataset is None or not has_length(train_dataset):
            return super()._get_train_sampler(train_dataset)
        # Shuffled from (seed, epoch) (transformers draws from the global generator): a run
        # resumed inside an epoch gets that epoch's order, whatever ran before.
        return LengthGroupedSampler(
            self.args.train_batch_size * self.args.gradient_accumulation_steps,
            dataset=train_dataset,
            lengths=self._dataset_lengths(train_dataset),
            seed=self.args.data_seed if self.args.data_seed is not None else self.args.seed,
        )

    def _get_eval_sampler(self, eval_dataset: Any) -> Any:
        eval_dataset = unwrap(eval_dataset)
        if (
            self.args.train_sampling_strategy != "group_by_length"
            or eval_dataset is None
            or not has_length(eval_dataset)
        ):
            return super()._get_eval_sampler(eval_dataset)
        seed = self.args.data_seed if self.args.data_seed is not None else self.args.seed
        return LengthGroupedSampler(
            self.args.eval_batch_size,
            dataset=eval_dataset,
            lengths=self._dataset_lengths(eval_dataset),
            generator=torch.Generator().manual_seed(seed),
        )


class Trainer(ArrowTrainerMixin, transformers.Trainer):
    """A `transformers.Trainer` whose default `data_collator` is fastcollate's (chosen exactly
    as transformers chooses its own) and which, with
    `train_sampling_strategy="group_by_length"`, reads lengths from Arrow and groups them in
    Rust: transformers' grouping, without decoding every row at startup, shuffled from
    (seed, epoch). At each epoch it calls the collator's `set_epoch` when it has one, and each
    batch is collated with its place (loader, epoch, position) set, so seeded masked-LM masks
    differ from epoch to epoch, evaluation leaves the training masks alone, and a run resumed
    from a checkpoint trains on the batches and masks of the uninterrupted run."""


class Seq2SeqTrainer(ArrowTrainerMixin, transformers.Seq2SeqTrainer):
    """A `transformers.Seq2SeqTrainer` (generation in evaluation and prediction with
    `predict_with_generate`) with everything `fastcollate.Trainer` adds: fastcollate's default
    collator (chosen as transformers chooses its own; pass `DataCollatorForSeq2Seq` for
    labels to be padded), batches read straight from Arrow, fast length grouping and streams."""
