"""`PackedStream`: token-budget batches packed on the fly from a stream of rows (a
`datasets.IterableDataset`, a torch `IterableDataset`, a generator), one bounded buffer at a
time, with the packing decided in Rust."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from .. import _native
from .._internal.options import checked_count
from .buffered_stream import DEFAULT_BUFFER, BufferedStream


class PackedStream(BufferedStream):
    r"""Packs a stream of rows into batches of at most `max_tokens` tokens, lazily: an
    iterable (a torch `IterableDataset`) yielding each batch as a list of rows, for
    `DataLoader(packed, batch_size=None, collate_fn=DataCollatorWithFlattening())`.

    Rows are read into a buffer of `buffer` rows; the buffer is packed best-fit decreasing
    (longest first, each into the fullest batch it still fits) in Rust, its batches are yielded
    in shuffled order, and its least full batch is carried into the next buffer to be topped
    up, so only the stream's last batches can be part-empty. The shuffle is keyed on `seed`,
    the epoch and the buffer's number: the same stream gives the same batches for the same
    seed and epoch. `set_epoch(epoch)` changes them, and is passed on to the stream when it
    has a `set_epoch` (a shuffled `datasets.IterableDataset` reshuffles).

    A row's size is the length of its `column` (a list, tuple, 1-d array or tensor). A row
    longer than `max_tokens` is a ValueError naming its position in the stream, unless
    `truncate=True`: it is then yielded alone in its batch, cut to `max_tokens` — every value
    of that row as long as `column` is cut (a copy; the stream's row is not changed).

    Several processes and DataLoader workers: every row is in exactly one batch per epoch
    across the readers (each worker of each rank), and every rank yields as many batches.
    Every reader reads the whole stream and packs it the same way; rank `k` of `n` keeps
    batches `k, k + n, ...`, and its workers take turns at those (their counts need not match:
    the DataLoader takes them in turn). When the batches do not divide by the ranks, the last
    two rounds are cut again into as many batches as the ranks need (the batch with the most
    rows halved until there are enough; only batches of one row each force a repeat of the
    epoch's first batches); `drop_last=True` drops the last round of fewer batches than ranks
    instead, as accelerate's `IterableDatasetShard` does. Nothing is exchanged between
    processes, so nothing can hang; the price is that each reader reads every row. A source
    that is already split is never split again: `source_sharded` says which share each
    reader's source yields (False: every row; "rank": this rank's rows, dealt out to its
    DataLoader workers; "worker": this worker's rows, dealt out to the ranks; True: this
    reader's own). It is read off a `datasets` stream (`split_dataset_by_node` means "rank"), a
    Ray Data shard (`get_dataset_shard`: "rank"), a list or tuple (False) or the source's own
    `source_sharded` attribute; for any other source read by several readers, not saying it
    is a ValueError. When each rank packs its own rows (a source split by rank), the ranks'
    batch counts are evened out by one collective per batch on torch.distributed's process
    group (the rank that runs out first repeats its epoch's first batches; `drop_last=True`
    stops every rank with the first one), which needs the stream iterated in the main process
    (`num_workers=0`); without a process group each rank yields its own count.
    `read_shards` has each DataLoader worker of a single rank read only its own shards of a
    whole `datasets.IterableDataset` (of `m` workers, worker `w` reads shards `w, w + m, ...`)
    and pack them by itself, in place of reading every row: every row is still in exactly one
    batch per epoch. Left at None it is on when the source is such a stream with at least one
    shard per worker, on one rank; `True` that cannot be honoured (several ranks, whose counts
    could then only be evened out by repeating or dropping rows; too few shards; another
    source) is a ValueError; `False` reads every row in every reader. `num_replicas` and
    `rank` default to torch.distributed's world size and rank when its process group is
    initialized, else 1 and 0."""

    def __init__(
        self,
        iterable: Iterable[Any],
        max_tokens: int,
        *,
        buffer: int = DEFAULT_BUFFER,
        seed: int = 0,
        column: str = "input_ids",
        truncate: bool = False,
        num_replicas: int | None = None,
        rank: int | None = None,
        drop_last: bool = False,
        source_sharded: bool | str | None = None,
        read_shards: bool | None = None,
    ):
        super().__init__(iterable, buffer=buffer, seed=seed, column=column,
                         num_replicas=num_replicas, rank=rank, drop_last=drop_last,
                         source_sharded=source_sharded, read_shards=read_shards)
        self.max_tokens = checked_count(max_tokens, "max_tokens", 1)
        self.truncate = bool(truncate)

    def _identity(self) -> dict[str, Any]:
        return {**super()._identity(), "max_tokens": self.max_tokens, "truncate": self.truncate}

    def _size(self, row: Any, position: int | str) -> tuple[Any, int]:
        """The row as packed (cut to `max_tokens` when over-long and `truncate`) and its
        token count; an over-long row is an error otherwise."""
        size = self._length(row, position)
        if size <= self.max_tokens:
            return row, size
        if not self.truncate:
            raise ValueError(
                f"row {position} of the stream has {size} tokens in {self.column!r}, more than "
                f"max_tokens={self.max_tokens}; truncate it when tokenizing, raise max_tokens, "
                "or pass truncate=True to cut it to max_tokens"
            )
        return self._cut(row, size), self.max_tokens

    def _cut(self, row: Mapping[str, Any], size: int) -> dict[str, Any]:
        """A copy of an over-long `row` with every value as long as its column cut."""
        budget = self.max_tokens
        out = dict(row)
        for key, value in row.items():
            if isinstance(value, (str, bytes)) or getattr(value, "ndim", 1) != 1:
                continue
            try:
                if len(value) == size:
                    out[key] = value[:budget]
            except TypeError:
                continue
        return out

    def _plan(self, sizes: np.ndarray, *, last: bool, epoch: int,
              buffer_number: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return _native.pack_stream_buffer(
            sizes,
            self.max_tokens,
            truncate=self.truncate,
            last=last,
            seed=self.seed,
            epoch=epoch,
            buffer_number=buffer_number,
        )
