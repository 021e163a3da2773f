"""`BufferedStream`: what `PackedStream` and `LengthGroupedStream` share — reading a stream of
rows (a `datasets.IterableDataset`, a torch `IterableDataset`, a generator) one bounded buffer
at a time, the seeded epoch, each row's length, and dealing the batches out to the readers
(ranks x DataLoader workers) so that each reader yields the same number of batches."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import torch

from .._internal.options import checked_count
from .shard_reading import (
    check_shard_reading,
    checked_shard_reading,
    reader_shards,
    reads_own_shards,
)
from .sharding import check_not_resharded, checked_world
from .source_sharding import checked_sharding, readers_to_deal, sharding_for

DEFAULT_BUFFER = 4096

# Rows taken at a time from a datasets.IterableDataset (its `iter(batch_size=...)`).
_READ_BATCH = 256

# How many of an epoch's first batches a rank keeps to fill the rounds it has no batch for.
_FILL_BATCHES = 8


def _datasets_stream(value: Any) -> bool:
    datasets = sys.modules.get("datasets")
    return datasets is not None and isinstance(value, datasets.IterableDataset)


def rows_of(source: Any) -> Iterator[Any]:
    """Every row of `source`, in its order, in whichever process or worker reads it.

    A `datasets.IterableDataset` iterated inside a DataLoader worker hands that worker only
    some of its shards; read through `iter(batch_size=...)` it yields every row, as every
    reader of a buffered stream needs (the readers then keep disjoint batches)."""
    if _datasets_stream(source):
        for columns in source.iter(batch_size=_READ_BATCH):
            keys = list(columns)
            for values in zip(*(columns[key] for key in keys), strict=True):
                yield dict(zip(keys, values, strict=True))
        return
    if _ray_rows(source):
        yield from source.iter_rows()
        return
    yield from source


def _process_group() -> bool:
    distributed = torch.distributed
    return distributed.is_available() and distributed.is_initialized()


def _ray_rows(value: Any) -> bool:
    """Whether `value` is a Ray Data iterator or Dataset (read through `iter_rows()`)."""
    ray_data = sys.modules.get("ray.data")
    types = tuple(t for t in (getattr(ray_data, "DataIterator", None),
                              getattr(ray_data, "Dataset", None)) if t is not None)
    return bool(types) and isinstance(value, types)


def deal(batches: Iterable[list[Any]], readers: int, reader: int,
         drop_last: bool) -> Iterator[list[Any]]:
    """Reader `reader`'s share of `batches` (every reader is given the same batches): batches
    `reader, reader + readers, ...`, each yielded once its round is complete, so that every
    reader yields the same number. A last, uneven round is filled by repeating the first
    batches of the epoch, or dropped with `drop_last`."""
    first: list[list[Any]] = []  # the epoch's first round, to fill an uneven last one
    pending: list[Any] | None = None
    total = 0
    for batch in batches:
        if total < readers:
            first.append(batch)
        if total % readers == reader:
            pending = batch
        total += 1
        if total % readers == 0 and pending is not None:
            # The round is complete: every reader has a batch in it.
            yield pending
            pending = None
    if total % readers == 0 or drop_last:
        return
    # The last round is short: readers without a batch in it repeat one of the first.
    if pending is not None:
        yield pending
    else:
        yield first[(total - total % readers + reader) % total]


def even_across_ranks(batches: Iterable[list[Any]], drop_last: bool,
                      stream: str) -> Iterator[list[Any]]:
    """`batches` (this rank's own), as many as every other rank yields: one collective per
    batch on torch.distributed's default group says whether any rank still has one. A rank
    that runs out first repeats its epoch's first batches until every rank has run out; with
    `drop_last`, every rank stops when the first one runs out."""
    distributed = torch.distributed
    device = torch.device("cpu")
    if distributed.get_backend() == "nccl":
        device = torch.device("cuda", torch.cuda.current_device())
    operation = distributed.ReduceOp.MIN if drop_last else distributed.ReduceOp.MAX
    first: list[list[Any]] = []
    source = iter(batches)
    exhausted = False
    filled = 0
    while True:
        batch = None if exhausted else next(source, None)
        exhausted = batch is None
        more = torch.tensor([0 if exhausted else 1], dtype=torch.int64, device=device)
        distributed.all_reduce(more, op=operation)
        if int(more.item()) == 0:
            return
        if batch is None:
            if not first:
                raise ValueError(
                    f"{stream}: rank {distributed.get_rank()} has no rows this epoch while "
                    "other ranks do; give every rank part of the stream"
                )
            batch = first[filled % len(first)]
            filled += 1
        elif len(first) < _FILL_BATCHES:
            first.append(batch)
        yield batch


class BufferedStream(torch.utils.data.IterableDataset[Any]):
    """The shared part of the buffered streams; a subclass makes the epoch's batches
    (`_batches`, every reader the same) from the rows `_buffers` reads."""

    def __init__(
        self,
        iterable: Iterable[Any],
        *,
        buffer: int,
        seed: int,
        column: str,
        num_replicas: int | None,
        rank: int | None,
        drop_last: bool,
        source_sharded: Any,
        read_shards: bool | None,
    ):
        name = type(self).__name__
        if not (isinstance(iterable, Iterable) or _ray_rows(iterable)) or isinstance(
            iterable, (str, bytes, Mapping)
        ):
            raise TypeError(
                f"{name}: iterable must be an iterable of rows, not {type(iterable).__name__}"
            )
        self.iterable = iterable
        self.buffer = checked_count(buffer, "buffer", 1)
        self.seed = checked_count(seed, "seed", 0)
        if not isinstance(column, str):
            raise TypeError(f"column must be a str, not {type(column).__name__}")
        self.column = column
        self.num_replicas, self.rank = checked_world(num_replicas, rank)
        self.drop_last = bool(drop_last)
        self.source_sharded = checked_sharding(source_sharded)
        self.read_shards = checked_shard_reading(read_shards)
        check_shard_reading(iterable, self.read_shards, self.source_sharded, name,
                            self.num_replicas)
        # Whether a process group existed where the stream was made: a DataLoader worker, which
        # has none, learns it from here.
        self._process_group = _process_group()
        # Refused now when the readers are known to be several (the ranks); DataLoader
        # workers are only known when iterating.
        sharding_for(iterable, self.source_sharded, name, self.num_replicas, 1)
        # In shared memory, so that persistent DataLoader workers see set_epoch too.
        self._epoch = torch.zeros((), dtype=torch.int64).share_memory_()  # type: ignore[no-untyped-call]  # untyped upstream
        # Batches of the current epoch this reader has handed out, whether it has handed out
        # all of them, and how many of the epoch's batches the next iteration skips
        # (load_state_dict).
        self._yielded = 0
        self._complete = False
        self._skip = 0
        self._rest_empty = False  # a complete place was loaded: this pass has nothing left
        # Which reader of how many this one is ([index, count], set when it iterates), and
        # the one a loaded place was saved by.
        self._reader: list[int] | None = None
        self._saved_reader: Any = None

    @property
    def epoch(self) -> int:
        return int(self._epoch.item())

    def set_epoch(self, epoch: int) -> None:
        """Sets the epoch (the batches are a function of seed, epoch and the stream's order),
        and the stream's own epoch when it has `set_epoch`."""
        check_not_resharded(type(self).__name__, self.num_replicas, sys._getframe(1))
        epoch = checked_count(epoch, "epoch", 0)
        if epoch != self.epoch:
            # A new epoch starts at its first batch (a place loaded by load_state_dict was in
            # another epoch).
            self._skip = 0
            self._yielded = 0
            self._complete = False
            self._rest_empty = False
        self._epoch.fill_(epoch)
        set_source_epoch = getattr(self.iterable, "set_epoch", None)
        if callable(set_source_epoch):
            set_source_epoch(epoch)

    def state_dict(self) -> dict[str, Any]:
        """Where this reader is: the epoch, how many of its batches of that epoch it has
        handed out, whether that was all of them (`complete`, known as the last one is handed
        out), and which reader of how many this is (`reader`: [rank x workers + worker,
        ranks x workers], None before it iterates). In a DataLoader worker, that worker's
        place: torchdata's `StatefulDataLoader` asks each worker."""
        return {"epoch": self.epoch, "batches": self._yielded, "complete": self._complete,
                "reader": self._reader}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resumes at `state` (from `state_dict`): sets the epoch, and the next iteration
        yields that epoch's batches after the first `state["batches"]`, exactly those an
        uninterrupted run would have yielded next (a ValueError when it iterates as another
        reader, of another count of ranks x workers, than the one that saved it: its batches
        differ). The buffers are rebuilt, not stored: the skipped batches are read and planned
        again (not yielded), which needs the source to give the same rows in the same order
        for the same epoch, as a seeded stream does. A `complete` place (this reader had handed
        out all of its epoch) leaves the epoch as it is, and the next iteration yields nothing:
        the pass it resumes had nothing left here. (torchdata's `StatefulDataLoader` then starts
        the next pass afresh when the whole loader had finished, at the epoch its loop sets.)"""
        if not isinstance(state, Mapping) or not {"epoch", "batches"} <= set(state):
            raise ValueError(
                f"{type(self).__name__}.load_state_dict needs a mapping with 'epoch' and "
                f"'batches' (what state_dict returns), not {state!r}"
            )
        batches = checked_count(state["batches"], "batches", 0)
        self._saved_reader = state.get("reader")
        if state.get("complete", False):
            self._skip = 0
            self._rest_empty = True
            self._yielded = batches
            self._complete = True
            return
        self.set_epoch(state["epoch"])
        self._skip = batches
        self._yielded = batches

    def _length(self, row: Any, position: int) -> int:
        """The length of `row`'s `column` (the stream's row `position`), checked."""
        column = self.column
        if not isinstance(row, Mapping):
            raise TypeError(
                f"row {position} of the stream is a {type(row).__name__}, not a mapping of "
                "columns"
            )
        if column not in row:
            raise ValueError(
                f"row {position} of the stream has no {column!r} column (it has "
                f"{sorted(map(str, row))}); pass column= to name the one to measure"
            )
        value = row[column]
        message = (
            f"row {position}: {column!r} must be a list, tuple, 1-d array or tensor of "
            f"token ids, not {type(value).__name__}"
        )
        if isinstance(value, (str, bytes)) or getattr(value, "ndim", 1) != 1:
            raise TypeError(message)
        try:
            return len(value)
        except TypeError:
            raise TypeError(message) from None

    def _size(self, row: Any, position: int) -> tuple[Any, int]:
        """The row as it goes into the buffer and its size there (a subclass may check or
        cut it)."""
        return row, self._length(row, position)

    def _plan(self, sizes: np.ndarray, *, last: bool, epoch: int,
              buffer_number: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One buffer's batches: (indices, offsets) in buffer positions, in the order to
        emit them, and the positions carried into the next buffer (none when `last`)."""
        raise NotImplementedError

    def _batches(self, source: Any) -> Iterator[list[Any]]:
        """Every batch of the epoch, in order, as every reader of `source` makes them (the
        stream, or this reader's shards of it): `source` read `buffer` rows at a time (the
        rows the previous buffer carried first), each buffer planned by `_plan`."""
        epoch = self.epoch
        rows: list[Any] = []
        sizes: list[int] = []
        position = 0
        buffer_number = 0
        source = rows_of(source)
        exhausted = False
        while not exhausted:
            for row in source:
                row, size = self._size(row, position)
                position += 1
                rows.append(row)
                sizes.append(size)
                if len(rows) >= self.buffer:
                    break
            else:
                exhausted = True
            if not rows:
                return
            indices, offsets, carried = self._plan(
                np.asarray(sizes, dtype=np.int64),
                last=exhausted,
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
        name = type(self).__name__
        check_not_resharded(name, self.num_replicas, sys._getframe(1))
        worker = torch.utils.data.get_worker_info()
        workers, worker_id = (worker.num_workers, worker.id) if worker is not None else (1, 0)
        ranks = self.num_replicas
        sharding = sharding_for(self.iterable, self.source_sharded, name, ranks, workers)
        # A DataLoader worker has no process group of its own: whether the ranks share one was
        # seen where the stream was made.
        process_group = self._process_group if worker is not None else _process_group()
        source = self.iterable
        if reads_own_shards(source, self.read_shards, sharding, name, ranks, workers,
                            worker is not None, process_group):
            source = reader_shards(source, ranks * workers, self.rank * workers + worker_id)
            sharding = True  # this reader's own rows
        readers, reader = readers_to_deal(sharding, ranks, self.rank, workers, worker_id)
        skip, self._skip = self._skip, 0
        rest_empty, self._rest_empty = self._rest_empty, False
        here = [self.rank * workers + worker_id, ranks * workers]
        saved, self._saved_reader = self._saved_reader, None
        if (skip or rest_empty) and saved is not None and list(saved) != here:
            raise ValueError(
                f"{name}: the place given to load_state_dict was saved by reader {saved[0]} of "
                f"{saved[1]} (rank x DataLoader workers + worker), but this is reader {here[0]} "
                f"of {here[1]}, whose batches differ: resume with the ranks and num_workers "
                "it was saved with"
            )
        self._reader = here
        if rest_empty:
            return iter(())
        batches = deal(self._batches(source), readers, reader, self.drop_last)
        if ranks == 1 or sharding not in ("rank", True):
            return self._counted(batches, skip)  # every rank deals out the same batches
        # Each rank packs its own rows: the ranks' batch counts are evened out by a
        # collective, which only the process holding the process group can run.
        if worker is not None and self._process_group:
            raise ValueError(
                f"{name}: the source yields each of the {ranks} ranks its own rows, so the "
                "ranks' batch counts differ and are evened out by a collective, which a "
                "DataLoader worker cannot run: iterate it with num_workers=0, or give every "
                "rank the whole stream (source_sharded=False or 'worker')"
            )
        if worker is not None or not _process_group():
            return self._counted(batches, skip)  # nothing to exchange: each rank its own count
        return self._counted(even_across_ranks(batches, self.drop_last, name), skip)

    def _counted(self, batches: Iterator[list[Any]], skip: int) -> Iterator[list[Any]]:
        """`batches` after the first `skip`, counted for `state_dict`: one batch ahead, so that
        `complete` is known as the last one is handed out (a stateful loader's worker takes its
        place right after each batch)."""
        self._yielded = 0
        self._complete = False
        source = iter(batches)
        batch = next(source, None)
        while batch is not None:
            following = next(source, None)
            self._yielded += 1
            self._complete = following is None
            if self._yielded > skip:
                yield batch
            batch = following
        self._complete = True
