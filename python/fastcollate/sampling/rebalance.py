"""`BatchRebalanceSampler`: transformers 5.23's cost-balanced micro-batch sampler on the Rust
core. The epoch order is drawn in Python with `torch.randperm` (seeded with `seed + epoch`)
exactly as transformers draws it; sorting, hill-climbing balance and the snake assignment of
groups to (gradient-accumulation slot, rank) run in Rust for the whole epoch at once."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import Sampler

from .. import _native
from .._internal.options import checked_count
from .lengths import as_lengths, reject_stream
from .packing import split_batches
from .sharding import copies_per_batch


class BatchRebalanceSampler(Sampler[list[int]]):
    r"""Same constructor and micro-batches as
    `transformers.trainer_pt_utils.BatchRebalanceSampler` for the same lengths, seed and epoch:
    per optimizer step, `effective_batch_size` indices of a `torch.randperm` order seeded with
    `seed + epoch` are sorted longest first and cut into `dp_size * grad_accum` groups of
    near-equal cost (`bs*max_len + 0.001*bs*max_len²`); rank `rank` yields its `grad_accum`
    micro-batches of each step. With `drop_last=False` the trailing partial step is kept,
    padded from the start of the epoch order when it has fewer samples than groups.

    `lengths` may be a list, numpy array, tensor or a `datasets` column (read from Arrow:
    `fastcollate.sequence_lengths(dataset)` gives them without decoding rows). Call
    `set_epoch` each epoch. `self.lengths` is an int64 numpy array (transformers keeps a
    list).

    Under `accelerator.prepare` (`split_batches=False`) the prepared loader yields this rank's
    micro-batches, each once; transformers' sampler loses all but every `dp_size`-th of them
    there unless its Trainer builds the loader.

    Differences: bad arguments raise a ValueError up front (transformers asserts, or fails
    with an IndexError mid-epoch for a rank outside `[0, dp_size)`); negative lengths are
    rejected."""

    def __init__(
        self,
        lengths: Any,
        effective_batch_size: int,
        dp_size: int,
        grad_accum: int,
        shuffle: bool = True,
        seed: int = 42,
        rank: int = 0,
        drop_last: bool = True,
    ):
        reject_stream(lengths, "lengths", "BatchRebalanceSampler")
        self.dp_size = checked_count(dp_size, "dp_size", 1)
        self.grad_accum = checked_count(grad_accum, "grad_accum", 1)
        groups = self.dp_size * self.grad_accum
        self.effective_batch_size = checked_count(effective_batch_size, "effective_batch_size", 1)
        if self.effective_batch_size < groups:
            raise ValueError(
                f"effective_batch_size ({self.effective_batch_size}) must be at least "
                f"dp_size * grad_accum ({groups}): every micro-batch needs a sample"
            )
        self.rank = checked_count(rank, "rank", 0)
        if self.rank >= self.dp_size:
            raise ValueError(f"rank {self.rank} is outside [0, {self.dp_size}) (dp_size)")
        self.lengths = as_lengths(lengths)
        if len(self.lengths) and self.lengths.min() < 0:
            index = int(np.argmax(self.lengths < 0))
            raise ValueError(
                f"lengths[{index}] is {self.lengths[index]}; lengths must not be negative"
            )
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.epoch = 0

        self.num_full_batches = len(self.lengths) // self.effective_batch_size
        self.remainder = len(self.lengths) % self.effective_batch_size
        self.has_tail = (not drop_last) and self.remainder > 0
        self.num_global_batches = self.num_full_batches + (1 if self.has_tail else 0)

    def set_epoch(self, epoch: int) -> None:
        """Sets the epoch: the order is shuffled with `seed + epoch`, as transformers does."""
        self.epoch = epoch

    def __len__(self) -> int:
        copies = copies_per_batch("BatchRebalanceSampler", self.dp_size, self.rank)
        return self.num_global_batches * self.grad_accum * copies

    def epoch_order(self) -> np.ndarray:
        """This epoch's sample order (int64): transformers' `torch.randperm`, or 0..n-1."""
        n = len(self.lengths)
        if not self.shuffle:
            return np.arange(n, dtype=np.int64)
        generator = torch.Generator()
        generator.manual_seed(self.seed + self.epoch)
        return torch.randperm(n, generator=generator).numpy()

    def micro_batches(self, rank: int | None = None) -> list[list[int]]:
        """This epoch's micro-batches for `rank` (default: the sampler's), in yield order; with
        `rank=-1`, every rank's: per step, rank 0's `grad_accum` micro-batches, then rank 1's."""
        if rank is None:
            rank = self.rank
        indices, offsets = _native.rebalance_epoch(
            self.lengths,
            self.epoch_order(),
            self.effective_batch_size,
            self.dp_size,
            self.grad_accum,
            bool(self.drop_last),
            None if rank == -1 else rank,
        )
        return split_batches(indices, offsets)

    def __iter__(self) -> Iterator[list[int]]:
        copies = copies_per_batch("BatchRebalanceSampler", self.dp_size, self.rank)
        batches = self.micro_batches()
        if copies == 1:
            return iter(batches)
        return (batch for batch in batches for _ in range(copies))
