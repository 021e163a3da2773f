"""Drop-ins for transformers' LengthGroupedSampler and DistributedLengthGroupedSampler: lengths
from Arrow (`sequence_lengths`), grouping in Rust, the same indices for the same seed."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any, cast

import numpy as np
import torch
from torch.utils.data import DistributedSampler, Sampler

from .._internal.options import checked_count
from .grouping import grouped_indices_array
from .lengths import as_lengths, reject_stream, sequence_lengths


def _resolve_lengths(
    dataset: Any, lengths: Any, model_input_name: str | None, sampler: str
) -> np.ndarray:
    if dataset is None and lengths is None:
        raise ValueError("One of dataset and lengths must be provided.")
    # Indices are useless to a stream even when lengths are given.
    reject_stream(dataset, "dataset", sampler)
    reject_stream(lengths, "lengths", sampler)
    if lengths is None:
        column = model_input_name if model_input_name is not None else "input_ids"
        return sequence_lengths(dataset, column=column)
    lengths = as_lengths(lengths)
    try:
        size = len(dataset) if dataset is not None else None
    except TypeError:
        size = None
    if size is not None and size != len(lengths):
        # transformers accepts this and then skips rows or indexes past the end mid-epoch.
        raise ValueError(
            f"{sampler} got {len(lengths)} lengths for a dataset of {size} rows; there must be "
            "one length per row"
        )
    return cast(np.ndarray, lengths)


class LengthGroupedSampler(Sampler[int]):
    r"""Same constructor and order as `transformers.LengthGroupedSampler`: indices grouped so
    that each batch holds rows of similar length, shuffled by `torch.randperm` with `generator`
    (or the global torch RNG). Lengths are read from Arrow for a `datasets.Dataset`.

    `self.lengths` is an int64 numpy array (transformers keeps a list).

    Beyond transformers: with `seed=` (keyword only; not with `generator`), each iteration
    shuffles with a generator seeded `seed + epoch`, the epoch given to `set_epoch` (0 until
    then), as `DistributedLengthGroupedSampler` does: the order is a function of (seed, epoch),
    not of the random numbers drawn before, so a run resumed inside an epoch sees that epoch's
    order (`fastcollate.Trainer` passes its `data_seed` or `seed`). `set_epoch` is accepted
    without a seed too, and changes nothing then."""

    def __init__(
        self,
        batch_size: int,
        dataset: Any = None,
        lengths: Any = None,
        model_input_name: str | None = None,
        generator: Any = None,
        *,
        seed: int | None = None,
    ):
        self.batch_size = checked_count(batch_size, "batch_size", 1)
        self.lengths = _resolve_lengths(dataset, lengths, model_input_name, "LengthGroupedSampler")
        if seed is not None:
            if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
                raise TypeError(f"seed must be an int, not {type(seed).__name__}")
            if generator is not None:
                raise ValueError("LengthGroupedSampler takes a generator or a seed, not both")
        self.generator = generator
        self.seed = None if seed is None else int(seed)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose order the next iteration gives (with `seed=`)."""
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return len(self.lengths)

    def __iter__(self) -> Iterator[int]:
        generator = self.generator
        if self.seed is not None:
            generator = torch.Generator().manual_seed(self.seed + self.epoch)
        indices = grouped_indices_array(self.lengths, self.batch_size, None, generator)
        return iter(indices.tolist())


class DistributedLengthGroupedSampler(DistributedSampler[int]):
    r"""Same constructor and per-rank order as `transformers.DistributedLengthGroupedSampler`
    for the same seed and epoch (call `set_epoch` each epoch, as with any DistributedSampler).

    Differences: a rank outside `[0, num_replicas)` is an error, and when the dataset is
    smaller than the padding it needs, indices are repeated (as torch's DistributedSampler
    does) where transformers fails an assertion."""

    # Like transformers', this does not call DistributedSampler.__init__ (it needs no dataset).
    def __init__(
        self,
        batch_size: int,
        dataset: Any = None,
        num_replicas: int | None = None,
        rank: int | None = None,
        seed: int = 0,
        drop_last: bool = False,
        lengths: Any = None,
        model_input_name: str | None = None,
    ):
        if dataset is None and lengths is None:
            raise ValueError("One of dataset and lengths must be provided.")
        reject_stream(dataset, "dataset", "DistributedLengthGroupedSampler")
        reject_stream(lengths, "lengths", "DistributedLengthGroupedSampler")
        if num_replicas is None:
            if not torch.distributed.is_available():
                raise RuntimeError("Requires distributed package to be available")
            num_replicas = torch.distributed.get_world_size()
        if rank is None:
            if not torch.distributed.is_available():
                raise RuntimeError("Requires distributed package to be available")
            rank = torch.distributed.get_rank()
        if rank >= num_replicas or rank < 0:
            raise ValueError(
                f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]"
            )

        self.batch_size = checked_count(batch_size, "batch_size", 1)
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        self.lengths = _resolve_lengths(
            dataset, lengths, model_input_name, "DistributedLengthGroupedSampler"
        )

        if self.drop_last and len(self.lengths) % self.num_replicas != 0:
            self.num_samples = math.ceil(
                (len(self.lengths) - self.num_replicas) / self.num_replicas
            )
        else:
            self.num_samples = math.ceil(len(self.lengths) / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas
        self.seed = seed

    def __iter__(self) -> Iterator[int]:
        # Deterministically shuffled from seed and epoch, as transformers does.
        generator = torch.Generator()
        generator.manual_seed(self.seed + self.epoch)
        indices = grouped_indices_array(self.lengths, self.batch_size, None, generator)
        if not self.drop_last:
            padding = self.total_size - len(indices)
            if padding > 0:
                indices = np.concatenate([indices, np.resize(indices, padding)])
        else:
            indices = indices[: self.total_size]
        return iter(indices[self.rank : self.total_size : self.num_replicas].tolist())
