"""`PackedStream`: token-budget batches packed on the fly from a stream of rows (a
`datasets.IterableDataset`, a torch `IterableDataset`, a generator), one bounded buffer at a
time, with the packing decided in Rust."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import torch

from .. import _native
from .packing import checked_count
from .sharding import checked_world

DEFAULT_BUFFER = 4096

# Rows taken at a time from a datasets.IterableDataset (its `iter(batch_size=...)`).
_READ_BATCH = 256


def _datasets_stream(value: Any) -> bool:
    datasets = sys.modules.get("datasets")
    return datasets is not None and isinstance(value, datasets.IterableDataset)


def _rows_of(source: Any) -> Iterator[Any]:
    """Every row of `source`, in its order, in whichever process or worker reads it.

    A `datasets.IterableDataset` iterated inside a DataLoader worker hands that worker only
    some of its shards; read through `iter(batch_size=...)` it yields every row, as every
    reader of a PackedStream needs (the readers then keep disjoint batches)."""
    if _datasets_stream(source):
        for columns in source.iter(batch_size=_READ_BATCH):
            keys = list(columns)
            for values in zip(*(columns[key] for key in keys), strict=True):
                yield dict(zip(keys, values, strict=True))
        return
    yield from source


class PackedStream(torch.utils.data.IterableDataset):
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

    Several processes and DataLoader workers: every reader (each worker of each rank) reads
    the whole stream and packs it the same way, and reader `r` of `n` keeps batches
    `r, r + n, ...`, so every row is in exactly one kept batch per epoch. Every reader yields
    the same number of batches: the last, uneven round is filled by repeating the epoch's
    first batches, or dropped with `drop_last=True`. Nothing is exchanged between processes,
    so nothing can hang; the price is that each reader reads every row. The stream must give
    every reader the same rows in the same order: do not shard it by rank or worker yourself
    (`split_dataset_by_node` is refused). `num_replicas` and `rank` default to
    torch.distributed's world size and rank when its process group is initialized, else 1
    and 0."""

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
    ):
        if not isinstance(iterable, Iterable) or isinstance(iterable, (str, bytes, Mapping)):
            raise TypeError(
                f"PackedStream: iterable must be an iterable of rows, not "
                f"{type(iterable).__name__}"
            )
        self.iterable = iterable
        self.max_tokens = checked_count(max_tokens, "max_tokens", 1)
        self.buffer = checked_count(buffer, "buffer", 1)
        self.seed = checked_count(seed, "seed", 0)
        if not isinstance(column, str):
            raise TypeError(f"column must be a str, not {type(column).__name__}")
        self.column = column
        self.num_replicas, self.rank = checked_world(num_replicas, rank)
        self.truncate = bool(truncate)
        self.drop_last = bool(drop_last)
        if _datasets_stream(iterable) and getattr(iterable, "_distributed", None) is not None:
            raise ValueError(
                "PackedStream: the datasets.IterableDataset was split with "
                "split_dataset_by_node; PackedStream gives each rank its own batches itself "
                "and needs every rank to read the whole stream. Pass the stream unsplit"
            )
        # In shared memory, so that persistent DataLoader workers see set_epoch too.
        self._epoch = torch.zeros((), dtype=torch.int64).share_memory_()

    @property
    def epoch(self) -> int:
        return int(self._epoch.item())

    def set_epoch(self, epoch: int) -> None:
        """Sets the epoch (the batches are a function of seed, epoch and the stream's order),
        and the stream's own epoch when it has `set_epoch`."""
        epoch = checked_count(epoch, "epoch", 0)
        self._epoch.fill_(epoch)
        set_source_epoch = getattr(self.iterable, "set_epoch", None)
        if callable(set_source_epoch):
            set_source_epoch(epoch)

    def _size(self, row: Any, position: int) -> int:
        """The token count of `row` (the stream's row `position`), checked."""
        column = self.column
        if not isinstance(row, Mapping):
            raise TypeError(
                f"row {position} of the stream is a {type(row).__name__}, not a mapping of "
                "columns"
            )
        if column not in row:
            raise ValueError(
                f"row {position} of the stream has no {column!r} column (it has "
                f"{sorted(map(str, row))}); pass column= to name the one to pack by"
            )
        value = row[column]
        if isinstance(value, (str, bytes)) or getattr(value, "ndim", 1) != 1:
            raise TypeError(
                f"row {position}: {column!r} must be a list, tuple, 1-d array or tensor of "
                f"token ids, not {type(value).__name__}"
            )
        try:
            size = len(value)
        except TypeError:
            raise TypeError(
                f"row {position}: {column!r} must be a list, tuple, 1-d array or tensor of "
                f"token ids, not {type(value).__name__}"
            ) from None
        if size > self.max_tokens and not self.truncate:
            raise ValueError(
                f"row {position} of the stream has {size} tokens in {column!r}, more than "
                f"max_tokens={self.max_tokens}; truncate it when tokenizing, raise max_tokens, "
                "or pass truncate=True to cut it to max_tokens"
            )
        return size

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

    def _batches(self) -> Iterator[list[Any]]:
        """Every batch of the epoch, in order, as every reader makes them."""
        epoch = self.epoch
        rows: list[Any] = []
        sizes: list[int] = []
        position = 0
        buffer_number = 0
        source = _rows_of(self.iterable)
        exhausted = False
        while not exhausted:
            for row in source:
                size = self._size(row, position)
                position += 1
                if size > self.max_tokens:
                    row = self._cut(row, size)
                    size = self.max_tokens
                rows.append(row)
                sizes.append(size)
                if len(rows) >= self.buffer:
                    break
            else:
                exhausted = True
            if not rows:
                return
            indices, offsets, carried = _native.pack_stream_buffer(
                np.asarray(sizes, dtype=np.int64),
                self.max_tokens,
                truncate=self.truncate,
                last=exhausted,
                seed=self.seed,
                epoch=epoch,
                buffer_number=buffer_number,
            )
            buffer_number += 1
            flat = indices.tolist()
            bounds = offsets.tolist()
            for start, end in zip(bounds[:-1], bounds[1:], strict=True):
                yield [rows[i] for i in flat[start:end]]
            kept = carried.tolist()
            rows = [rows[i] for i in kept]
            sizes = [sizes[i] for i in kept]

    def __iter__(self) -> Iterator[list[Any]]:
        worker = torch.utils.data.get_worker_info()
        workers, worker_id = (worker.num_workers, worker.id) if worker is not None else (1, 0)
        readers = self.num_replicas * workers
        reader = self.rank * workers + worker_id
        first: list[list[Any]] = []  # the epoch's first round, to fill an uneven last one
        pending: list[Any] | None = None
        total = 0
        for batch in self._batches():
            if total < readers:
                first.append(batch)
            if total % readers == reader:
                pending = batch
            total += 1
            if total % readers == 0 and pending is not None:
                # The round is complete: every reader has a batch in it.
                yield pending
                pending = None
        if total % readers == 0 or self.drop_last:
            return
        # The last round is short: readers without a batch in it repeat one of the first.
        if pending is not None:
            yield pending
        else:
            yield first[(total - total % readers + reader) % total]
