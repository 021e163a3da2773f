"""`PackedBatchSampler`: batches of sequences bin-packed to a token budget in Rust, for
padding-free training with `DataCollatorWithFlattening`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from .. import _native
from .._internal.options import checked_count
from .lengths import as_lengths, reject_stream
from .sharding import checked_world, copies_per_batch

DEFAULT_WINDOW_SIZE = 1024


def split_batches(indices: np.ndarray, offsets: np.ndarray) -> list[list[int]]:
    """The native (indices, offsets) pair as a list of index lists."""
    flat = indices.tolist()
    bounds = offsets.tolist()
    return [flat[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


class PackedBatchSampler:
    r"""A batch sampler (for `DataLoader(batch_sampler=...)`) yielding lists of indices whose
    lengths add up to at most `max_tokens`.

    Each epoch the indices are shuffled (a generator seeded by `seed` and the epoch: the same
    batches for the same seed and epoch, on every rank and machine) and cut into windows of
    `window_size` sequences; each window is packed best-fit decreasing and its batches are
    yielded in shuffled order, so batches stay random across the epoch. The least full batch
    of a window is carried into the next window, so only the last batches of the epoch can
    be part-empty. With `shuffle=False` the order is the dataset's and batches are not shuffled.

    Distributed: every index lands in exactly one batch per epoch; batch `b` goes to rank
    `b % num_replicas`, and every rank gets the same number of batches — the epoch's first
    batches are repeated to fill the last round (or the last round is dropped with
    `drop_last=True`). Call `set_epoch` each epoch. `num_replicas` and `rank` default to
    torch.distributed's world size and rank when its process group is initialized, else 1
    and 0. A rank-aware sampler may go through `accelerator.prepare`: its loader then yields
    this rank's batches, each once (`split_batches=False`; see the packing docs).

    A sequence longer than `max_tokens` is a ValueError naming its index and length, unless
    `truncate=True`: it then counts as `max_tokens` and gets a batch of its own, and the
    collator must cut it (`fastcollate.Trainer`'s packing collator does).

    `lengths`: a list, numpy array, tensor or `datasets` column of token counts
    (`fastcollate.sequence_lengths(dataset)` reads them from Arrow)."""

    def __init__(
        self,
        lengths: Any,
        max_tokens: int,
        *,
        shuffle: bool = True,
        seed: int = 0,
        num_replicas: int | None = None,
        rank: int | None = None,
        drop_last: bool = False,
        truncate: bool = False,
        window_size: int = DEFAULT_WINDOW_SIZE,
    ):
        reject_stream(lengths, "lengths", "PackedBatchSampler")
        self.lengths = as_lengths(lengths)
        self.max_tokens = checked_count(max_tokens, "max_tokens", 1)
        self.num_replicas, self.rank = checked_world(num_replicas, rank)
        self.seed = checked_count(seed, "seed", 0)
        self.window_size = checked_count(window_size, "window_size", 1)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.truncate = bool(truncate)
        self.epoch = 0
        self._cached: tuple[int, np.ndarray, np.ndarray] | None = None
        self._arrays()  # over-long or negative lengths fail here, not mid-training

    def set_epoch(self, epoch: int) -> None:
        """Sets the epoch: batches are a pure function of (seed, epoch)."""
        self.epoch = checked_count(epoch, "epoch", 0)

    def _arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """This rank's batches of the current epoch as native (indices, offsets), cached."""
        if self._cached is None or self._cached[0] != self.epoch:
            indices, offsets = _native.pack_epoch(
                self.lengths,
                self.max_tokens,
                window=self.window_size,
                shuffle=self.shuffle,
                seed=self.seed,
                epoch=self.epoch,
                truncate=self.truncate,
                num_replicas=self.num_replicas,
                rank=self.rank,
                drop_last=self.drop_last,
            )
            self._cached = (self.epoch, indices, offsets)
        return self._cached[1], self._cached[2]

    def __len__(self) -> int:
        """Batches this rank yields this epoch (packing decides it; it may change by an epoch
        or two batches from epoch to epoch)."""
        copies = copies_per_batch("PackedBatchSampler", self.num_replicas, self.rank)
        return (len(self._arrays()[1]) - 1) * copies

    def __iter__(self) -> Iterator[list[int]]:
        copies = copies_per_batch("PackedBatchSampler", self.num_replicas, self.rank)
        batches = split_batches(*self._arrays())
        if copies == 1:
            return iter(batches)
        return (batch for batch in batches for _ in range(copies))

    def token_efficiency(self) -> float:
        """Share of this rank's token budget (batches × max_tokens) filled by real tokens this
        epoch (repeated batches included)."""
        indices, offsets = self._arrays()
        batches = len(offsets) - 1
        if batches == 0:
            return 0.0
        tokens = int(np.minimum(self.lengths[indices], self.max_tokens).sum())
        return tokens / (batches * self.max_tokens)
