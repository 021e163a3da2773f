"""The batch samplers as `fastcollate.Trainer` hands them to transformers' training loop.

transformers' Trainer passes a `BatchRebalanceSampler` to its DataLoader as `batch_sampler`
and keeps accelerate from sharding it again (it is rank-aware already); any other sampler is
batched by `per_device_train_batch_size` and sharded by accelerate. Both of fastcollate's
batch samplers are rank-aware batch samplers, so the Trainer gets them as subclasses of
transformers' `BatchRebalanceSampler` too: that routes them down the same path with no copy
of transformers' DataLoader code. Only the type is borrowed; every method is fastcollate's.
They derive from fastcollate's `BatchRebalanceSampler` as well, which is the name the Trainer
checks while `patch_transformers()` is active."""

from __future__ import annotations

from typing import Any

from transformers.trainer_utils import has_length

from .._internal.datasets import stream_kind
from .._internal.patching import original
from ..sampling.buffered_stream import DEFAULT_BUFFER
from ..sampling.length_grouped_stream import LengthGroupedStream
from ..sampling.packed_stream import PackedStream
from ..sampling.packing import PackedBatchSampler
from ..sampling.rebalance import BatchRebalanceSampler
from .training_args import PACKED

_TransformersRebalance: Any = original("transformers.trainer_pt_utils", "BatchRebalanceSampler")


class TrainerBatchRebalanceSampler(BatchRebalanceSampler, _TransformersRebalance):
    """fastcollate's `BatchRebalanceSampler`, taken by the Trainer as transformers' own."""


class TrainerPackedBatchSampler(PackedBatchSampler, BatchRebalanceSampler, _TransformersRebalance):
    """`PackedBatchSampler`, taken by the Trainer as a rank-aware batch sampler."""


def _world(args: Any) -> tuple[int, int]:
    world_size = max(1, args.world_size)
    return world_size, (args.process_index if world_size > 1 else 0)


def rebalance_sampler(args: Any, lengths: Any) -> TrainerBatchRebalanceSampler:
    """What transformers' `_get_train_sampler` builds for "batch_rebalance" (its default seed,
    42, included), from lengths read from Arrow."""
    world_size, rank = _world(args)
    grad_accum = args.gradient_accumulation_steps
    return TrainerBatchRebalanceSampler(
        lengths=lengths,
        effective_batch_size=args.train_batch_size * grad_accum * world_size,
        dp_size=world_size,
        grad_accum=grad_accum,
        rank=rank,
        drop_last=args.dataloader_drop_last,
    )


def is_packed(args: Any) -> bool:
    return getattr(args, "train_sampling_strategy", None) == PACKED


def packed_sampler(args: Any, lengths: Any) -> TrainerPackedBatchSampler:
    """Token-budget batches for this rank, shuffled by the data seed."""
    budget = getattr(args, "max_tokens_per_batch", None)
    if budget is None:
        raise ValueError(
            "train_sampling_strategy='packed' needs a token budget: use "
            "fastcollate.TrainingArguments(..., max_tokens_per_batch=N)"
        )
    world_size, rank = _world(args)
    return TrainerPackedBatchSampler(
        lengths,
        budget,
        seed=args.data_seed if args.data_seed is not None else args.seed,
        num_replicas=world_size,
        rank=rank,
        drop_last=args.dataloader_drop_last,
        truncate=bool(getattr(args, "packing_truncation", False)),
    )


def is_packable_stream(dataset: Any) -> bool:
    """Whether packed training takes `dataset` through a `PackedStream`: a
    `datasets.IterableDataset` or a torch `IterableDataset` (what transformers' Trainer hands its
    DataLoader without a sampler)."""
    import torch

    return isinstance(dataset, torch.utils.data.IterableDataset) or (
        stream_kind(dataset) == "a datasets.IterableDataset"
    )


def packed_stream(args: Any, dataset: Any, column: str) -> PackedStream:
    """This rank's token-budget batches packed from the stream `dataset`, shuffled by the data
    seed (the same arguments as `packed_sampler` gives the map-style sampler)."""
    world_size, rank = _world(args)
    return PackedStream(
        dataset,
        args.max_tokens_per_batch,
        buffer=getattr(args, "packing_buffer", None) or DEFAULT_BUFFER,
        seed=args.data_seed if args.data_seed is not None else args.seed,
        column=column,
        truncate=bool(getattr(args, "packing_truncation", False)),
        num_replicas=world_size,
        rank=rank,
        drop_last=args.dataloader_drop_last,
    )


def grouped_stream(args: Any, dataset: Any, column: str) -> LengthGroupedStream:
    """This rank's batches of `train_batch_size` rows of similar length (by `column`) from the
    stream `dataset`, shuffled by the data seed. The buffer is `group_by_length_buffer` rows
    (default 4096, at least one batch)."""
    world_size, rank = _world(args)
    batch_size = args.train_batch_size
    buffer = getattr(args, "group_by_length_buffer", None) or max(DEFAULT_BUFFER, batch_size)
    return LengthGroupedStream(
        dataset,
        batch_size,
        buffer=buffer,
        seed=args.data_seed if args.data_seed is not None else args.seed,
        column=column,
        num_replicas=world_size,
        rank=rank,
        drop_last=args.dataloader_drop_last,
    )


# The strategies that need every row's length; transformers' Trainer passes a stream to its
# DataLoader as it is (no sampler), so they are not applied to one.
LENGTH_STRATEGIES = ("group_by_length", "batch_rebalance")


def stream_warning(args: Any, dataset: Any, training: bool) -> str | None:
    """What the Trainer must say about `dataset` when it is a stream: a ValueError for the
    packed strategy on the training set (its token budget cannot be honoured), a warning's
    text for a length strategy it cannot apply, None when nothing is lost. Reads nothing."""
    kind = stream_kind(dataset)
    if kind is None and dataset is not None and not has_length(dataset):
        kind = f"a dataset without __len__ ({type(dataset).__name__})"
    if kind is None:
        return None
    strategy = getattr(args, "train_sampling_strategy", None)
    which = "training" if training else "evaluation"
    if training and is_packed(args):
        if is_packable_stream(dataset):
            return None  # packed on the fly (PackedStream)
        budget = args.max_tokens_per_batch
        raise ValueError(
            f"train_sampling_strategy='packed' cannot keep batches within max_tokens_per_batch="
            f"{budget}: the {which} dataset is {kind}, and packing needs every row's length up "
            "front and random access to the rows. Unpacked, its batches would be "
            "per_device_train_batch_size rows of any length. Use a map-style datasets.Dataset "
            f"(load_dataset without streaming=True), or pack the stream into rows of at most "
            f"{budget} tokens beforehand and train with another strategy"
        )
    if training and strategy == "group_by_length" and is_packable_stream(dataset):
        return None  # grouped on the fly (LengthGroupedStream)
    # Evaluation groups by length only for group_by_length; batch_rebalance is training only.
    if strategy == "group_by_length" or (training and strategy == "batch_rebalance"):
        return (
            f"train_sampling_strategy={strategy!r} is not applied to the {which} dataset: it is "
            f"{kind}, which has no length or random access, so its rows are batched in the "
            "order the stream yields them. Use a map-style datasets.Dataset to sample by length"
        )
    return None


# Keys of a flattened batch with one value per token.
_TOKEN_KEYS = ("input_ids", "labels", "position_ids", "seq_idx")


class CutToTokenBudget:
    """Wraps a flattening collator for `packing_truncation`: a batch longer than the budget
    can only be one over-long sequence alone (the sampler packs it so), which is cut to
    `max_tokens` tokens, its `cu_seq_lens_*` / `max_length_*` with it."""

    def __init__(self, collator: Any, max_tokens: int):
        self.collator = collator
        self.max_tokens = max_tokens

    def __call__(self, features: Any, *args: Any, **kwargs: Any) -> Any:
        batch = self.collator(features, *args, **kwargs)
        budget = self.max_tokens
        if batch["input_ids"].shape[-1] <= budget:
            return batch
        for key in _TOKEN_KEYS:
            if key in batch:
                batch[key] = batch[key][..., :budget]
        for key in ("cu_seq_lens_q", "cu_seq_lens_k"):
            if key in batch:
                bounds = batch[key][:2]
                bounds = bounds.clone() if hasattr(bounds, "clone") else bounds.copy()
                bounds[1] = budget
                batch[key] = bounds
        for key in ("max_length_q", "max_length_k"):
            if key in batch:
                batch[key] = budget
        return batch

    def __getattr__(self, name: str) -> Any:
        # The Trainer and ArrowBatches look at the collator's attributes (return_tensors, ...).
        if name == "collator":  # not set yet (unpickling)
            raise AttributeError(name)
        return getattr(self.collator, name)
