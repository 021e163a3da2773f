"""`LengthGroupedStream`: batches of rows of similar length, grouped on the fly from a stream
of rows one bounded buffer at a time (transformers' `group_by_length` with the buffer as its
mega-batch), with the ordering decided in Rust."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from .. import _native
from .._internal.options import checked_count
from .buffered_stream import DEFAULT_BUFFER, BufferedStream


class LengthGroupedStream(BufferedStream):
    r"""Groups a stream of rows into batches of `batch_size` rows of similar length, lazily: an
    iterable (a torch `IterableDataset`) yielding each batch as a list of rows, for
    `DataLoader(grouped, batch_size=None, collate_fn=collator)`.

    Rows are read into a buffer of `buffer` rows, which plays the part of a mega-batch in
    transformers' `group_by_length`: the buffer is shuffled, sorted by the length of each row's
    `column` (longest first) and cut into batches of `batch_size` rows, which are yielded in
    shuffled order. Rows left over when a buffer does not divide into whole batches (picked at
    random, before the sort) are carried into the next buffer, so every batch has `batch_size`
    rows except perhaps the stream's last one, which is yielded last, or dropped with
    `drop_last=True` (as a DataLoader drops its incomplete batch). Every row of the stream is in
    exactly one batch per epoch otherwise. The shuffles are keyed on `seed`, the epoch and the
    buffer's number; `set_epoch(epoch)` changes them and is passed on to the stream when it has
    a `set_epoch`.

    Several processes and DataLoader workers are handled as by `PackedStream`: every reader
    reads the whole stream and groups it the same way, rank `k` of `n` keeps batches
    `k, k + n, ...` and its workers take turns at those, every row is in exactly one batch per
    epoch and every rank yields as many (the last two rounds cut again into smaller batches
    when the batches do not divide by the ranks, or the last round of fewer batches than ranks
    dropped with `drop_last=True`), and so is a source that is already split
    (`source_sharded`, read off the source where it can be, a ValueError naming it where it
    cannot and several readers exist; each rank's batch counts evened out by a collective when
    each rank groups its own rows), and so is `read_shards` (each DataLoader worker of a single
    rank grouping only its own shards of a `datasets` stream with enough of them).
    `num_replicas` and `rank` default to torch.distributed's world size and rank when its
    process group is initialized, else 1 and 0."""

    def __init__(
        self,
        iterable: Iterable[Any],
        batch_size: int,
        *,
        buffer: int = DEFAULT_BUFFER,
        seed: int = 0,
        column: str = "input_ids",
        num_replicas: int | None = None,
        rank: int | None = None,
        drop_last: bool = False,
        source_sharded: bool | str | None = None,
        read_shards: bool | None = None,
    ):
        super().__init__(iterable, buffer=buffer, seed=seed, column=column,
                         num_replicas=num_replicas, rank=rank, drop_last=drop_last,
                         source_sharded=source_sharded, read_shards=read_shards)
        self.batch_size = checked_count(batch_size, "batch_size", 1)
        if self.buffer < self.batch_size:
            raise ValueError(
                f"LengthGroupedStream: buffer={self.buffer} rows cannot hold one batch of "
                f"batch_size={self.batch_size}; give a buffer of at least batch_size rows "
                "(many batches' worth, for the grouping to have rows to choose from)"
            )

    def _identity(self) -> dict[str, Any]:
        return {**super()._identity(), "batch_size": self.batch_size}

    def _plan(self, sizes: np.ndarray, *, last: bool, epoch: int,
              buffer_number: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        indices, offsets, carried = _native.group_stream_buffer(
            sizes,
            self.batch_size,
            last=last,
            seed=self.seed,
            epoch=epoch,
            buffer_number=buffer_number,
        )
        if self.drop_last and len(offsets) > 1 and offsets[-1] - offsets[-2] < self.batch_size:
            offsets = offsets[:-1]  # the stream's incomplete last batch
        return indices, offsets, carried
