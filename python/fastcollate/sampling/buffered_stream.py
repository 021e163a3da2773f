"""`BufferedStream`: what `PackedStream` and `LengthGroupedStream` share — reading a stream of
rows (a `datasets.IterableDataset`, a torch `IterableDataset`, a generator) one bounded buffer
at a time, the seeded epoch, each row's length, and dealing the batches out to the readers
(ranks x DataLoader workers) so that every row is in exactly one batch and every rank yields the
same number of batches."""

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
from .source_sharding import checked_sharding, dealt_out, sharding_for

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


def stream_position(stream: Any, row: Any, share_position: int) -> int | str:
    """Where `row` (row `share_position` of a reader's shards, refused) lies in the whole
    `stream` at its epoch: the first row equal to it, read again. Only an error message needs
    it."""
    for position, candidate in enumerate(rows_of(stream)):
        if same_row(candidate, row):
            return position
    return f"{share_position} of this reader's shards"


def same_row(first: Any, second: Any) -> bool:
    """Whether two rows hold equal values (arrays and tensors compared element by element)."""
    if not (isinstance(first, Mapping) and isinstance(second, Mapping)):
        return _equal(first, second)
    return first.keys() == second.keys() and all(_equal(first[k], second[k]) for k in first)


def _equal(first: Any, second: Any) -> bool:
    try:
        return bool(first == second)
    except (TypeError, ValueError, RuntimeError):  # arrays and tensors: not one truth value
        return bool(np.array_equal(np.asarray(first), np.asarray(second)))


# An epoch is kept in an int64 tensor shared with DataLoader workers: it must fit one.
EPOCH_LIMIT = 2**63


def checked_epoch(value: Any, where: str) -> int:
    """`value` as an epoch in [0, 2**63): a TypeError / ValueError naming 'epoch' otherwise."""
    epoch = checked_count(value, f"{where}: 'epoch'", 0)
    if epoch >= EPOCH_LIMIT:
        raise ValueError(f"{where}: 'epoch' must be below 2**63, not {epoch}")
    return epoch


def checked_place(state: Any, stream: str, identity: Mapping[str, Any]) -> dict[str, Any]:
    """`state` (what `state_dict` returns) checked field by field: a ValueError naming the
    field that is missing, unknown or wrong, or the part of the stream's identity (`stream`:
    its class and the options its batches depend on) that differs from `identity`."""
    where = f"{stream}.load_state_dict"
    fields = ("epoch", "batches", "complete", "reader", "stream")
    if not isinstance(state, Mapping):
        raise ValueError(
            f"{where} needs a mapping with {', '.join(map(repr, fields))} (what state_dict "
            f"returns), not {type(state).__name__}"
        )
    missing = [field for field in fields if field not in state]
    unknown = sorted(map(repr, set(state) - set(fields)))
    if missing or unknown:
        raise ValueError(
            f"{where} needs a mapping with {', '.join(map(repr, fields))} (what state_dict "
            f"returns); {state!r} "
            + (f"has no {', '.join(map(repr, missing))}" if missing else
               f"has unknown field(s) {', '.join(unknown)}")
        )
    place: dict[str, Any] = {}
    for field in ("epoch", "batches"):
        value = state[field]
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise ValueError(f"{where}: '{field}' must be an integer >= 0, not {value!r}")
        place[field] = int(value)
    if place["epoch"] >= EPOCH_LIMIT:
        raise ValueError(f"{where}: 'epoch' must be below 2**63, not {place['epoch']}")
    complete = state["complete"]
    if not isinstance(complete, (bool, np.bool_)):
        raise ValueError(f"{where}: 'complete' must be True or False, not {complete!r}")
    place["complete"] = bool(complete)
    reader = state["reader"]
    if reader is not None:
        pair = list(reader) if isinstance(reader, (list, tuple)) else None
        if (pair is None or len(pair) != 2
                or any(isinstance(v, bool) or not isinstance(v, (int, np.integer))
                       for v in pair)
                or not 0 <= pair[0] < pair[1]):
            raise ValueError(
                f"{where}: 'reader' must be None or [index, count] with 0 <= index < count "
                f"(rank x DataLoader workers + worker, ranks x workers), not {reader!r}"
            )
        reader = [int(v) for v in pair]
    place["reader"] = reader
    check_identity(state["stream"], identity, where)
    return place


def check_identity(saved: Any, identity: Mapping[str, Any], where: str) -> None:
    """A ValueError naming each part of `saved` (a state's 'stream') that differs from this
    stream's `identity`: its batches would differ, and resuming would repeat or skip rows."""
    if not isinstance(saved, Mapping):
        raise ValueError(
            f"{where}: 'stream' must be the mapping state_dict gives (the stream's class and "
            f"options), not {saved!r}"
        )
    differences = [
        f"{key}={saved.get(key, '<missing>')!r} where this stream has {key}={value!r}"
        for key, value in identity.items() if saved.get(key, _ABSENT) != value
    ]
    differences += [f"unknown {key!r}" for key in sorted(map(str, set(saved) - set(identity)))]
    if differences:
        raise ValueError(
            f"{where}: the place was saved by another stream, whose batches differ ('stream': "
            f"{'; '.join(differences)}); load it into a stream made with the same class and "
            "options"
        )


_ABSENT = object()


def _process_group() -> bool:
    distributed = torch.distributed
    return distributed.is_available() and distributed.is_initialized()


def _ray_rows(value: Any) -> bool:
    """Whether `value` is a Ray Data iterator or Dataset (read through `iter_rows()`)."""
    ray_data = sys.modules.get("ray.data")
    types = tuple(t for t in (getattr(ray_data, "DataIterator", None),
                              getattr(ray_data, "Dataset", None)) if t is not None)
    return bool(types) and isinstance(value, types)


def deal_to_ranks(batches: Iterable[list[Any]], ranks: int, rank: int,
                  drop_last: bool) -> Iterator[list[Any]]:
    """Rank `rank`'s share of `batches` (every rank is given the same batches): batches
    `rank, rank + ranks, ...`, every rank as many. A last round of fewer than `ranks` batches
    is dropped with `drop_last` (as accelerate's `IterableDatasetShard` drops its last
    incomplete round); otherwise the last two rounds are cut again into as many batches as
    the ranks need (`recut`), so that every row is in exactly one batch. Two rounds are held
    back for that: the end of the epoch is only known once the source runs out."""
    if ranks == 1:
        yield from batches
        return
    first: list[list[Any]] = []  # the epoch's first round, should the last hold too few rows
    held: list[list[Any]] = []
    for batch in batches:
        if len(first) < ranks:
            first.append(batch)
        held.append(batch)
        if len(held) == 2 * ranks:
            # Another round follows this one: it is not the last, and goes out as it is.
            yield held[rank]
            del held[:ranks]
    if len(held) % ranks and drop_last:
        del held[len(held) - len(held) % ranks:]
    elif len(held) % ranks:
        held = recut(held, ranks * -(-len(held) // ranks), first)
    yield from held[rank::ranks]


def recut(batches: list[list[Any]], count: int, first: list[list[Any]]) -> list[list[Any]]:
    """`batches` cut into `count` batches, in order: the one with the most rows (the first
    such) halved until there are enough. Every new batch is part of an old one, so it keeps
    within the old one's budget. Only when the rows run out (batches of one row) are the
    epoch's `first` batches repeated to make up the count."""
    pieces = [list(batch) for batch in batches]
    while len(pieces) < count:
        largest = max(range(len(pieces)), key=lambda i: (len(pieces[i]), -i))
        batch = pieces[largest]
        if len(batch) < 2:
            break
        half = (len(batch) + 1) // 2
        pieces[largest:largest + 1] = [batch[:half], batch[half:]]
    for extra in range(count - len(pieces)):
        pieces.append(first[extra % len(first)])
    return pieces


def deal_to_workers(batches: Iterable[list[Any]], workers: int,
                    worker: int) -> Iterator[list[Any]]:
    """Worker `worker`'s share of its rank's `batches`: batches `worker, worker + workers, ...`.
    The workers need not yield as many: the rank's DataLoader takes them in turn, skipping a
    worker that has run out, so it yields exactly the rank's batches."""
    for index, batch in enumerate(batches):
        if index % workers == worker:
            yield batch


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
        # Batches of the current epoch this reader has handed out, and whether it has handed
        # out all of them (state_dict).
        self._yielded = 0
        self._complete = False
        # A place given to load_state_dict (checked_place), taken by the next iteration when
        # the stream is still in its epoch then.
        self._place: dict[str, Any] | None = None
        # Which reader of how many this one is ([index, count], set when it iterates).
        self._reader: list[int] | None = None

    @property
    def epoch(self) -> int:
        return int(self._epoch.item())

    def set_epoch(self, epoch: int) -> None:
        """Sets the epoch (the batches are a function of seed, epoch and the stream's order),
        and the stream's own epoch when it has `set_epoch`."""
        check_not_resharded(type(self).__name__, self.num_replicas, sys._getframe(1))
        epoch = checked_epoch(epoch, f"{type(self).__name__}.set_epoch")
        dropped = self._place is not None and self._place["epoch"] != epoch
        if epoch != self.epoch or dropped:
            # A new epoch: nothing of it handed out yet.
            self._yielded = 0
            self._complete = False
        if dropped:
            self._place = None  # a loaded place of another epoch: this one starts afresh
        self._epoch.fill_(epoch)
        set_source_epoch = getattr(self.iterable, "set_epoch", None)
        if callable(set_source_epoch):
            set_source_epoch(epoch)

    def state_dict(self) -> dict[str, Any]:
        """Where this reader is: the epoch, how many of its batches of that epoch it has
        handed out, whether that was all of them (`complete`, known as the last one is handed
        out), and which reader of how many this is (`reader`: [rank x workers + worker,
        ranks x workers], None before it iterates). In a DataLoader worker, that worker's
        place: torchdata's `StatefulDataLoader` asks each worker. `stream` identifies the
        stream (its class and the options its batches depend on): `load_state_dict` refuses a
        place saved by another. Right after `load_state_dict`, the place loaded (its epoch too,
        where a `complete` place leaves the stream's epoch as it was)."""
        place = self._place
        return {"epoch": self.epoch if place is None else place["epoch"],
                "batches": self._yielded, "complete": self._complete,
                "reader": self._reader, "stream": self._identity()}

    def _identity(self) -> dict[str, Any]:
        """What identifies this stream's batches (given the source and the epoch): its class
        and options, as plain values."""
        return {"class": type(self).__name__, "seed": self.seed, "buffer": self.buffer,
                "column": self.column, "drop_last": self.drop_last,
                "source_sharded": self.source_sharded, "read_shards": self.read_shards}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resumes at `state` (from `state_dict`; every field checked, a ValueError naming the
        one that is wrong): sets the epoch, and the next iteration in that epoch yields its
        batches after the first `state["batches"]`, exactly those an uninterrupted run would
        have yielded next (a ValueError when it iterates as another reader, of another count of
        ranks x workers, than the one that saved it: its batches differ). The buffers are
        rebuilt, not stored: the skipped batches are read and planned again (not yielded),
        which needs the source to give the same rows in the same order for the same epoch, as
        a seeded stream does. A `complete` place (this reader had handed out all of its epoch)
        leaves the stream's epoch as it is, and the next iteration in that epoch (after
        `set_epoch(that epoch)`, or with the stream already there) yields nothing: the epoch
        is over, and the next batch is the next epoch's first. Moving to another epoch with
        `set_epoch` drops the place. (torchdata's `StatefulDataLoader` loads each worker's
        place in the worker, at the epoch the loop has set.)"""
        place = checked_place(state, type(self).__name__, self._identity())
        if not place["complete"]:
            self.set_epoch(place["epoch"])
        self._place = place
        self._reader = place["reader"]
        self._yielded = place["batches"]
        self._complete = place["complete"]

    def _length(self, row: Any, position: int | str) -> int:
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

    def _size(self, row: Any, position: int | str) -> tuple[Any, int]:
        """The row as it goes into the buffer and its size there (a subclass may check or
        cut it)."""
        return row, self._length(row, position)

    def _plan(self, sizes: np.ndarray, *, last: bool, epoch: int,
              buffer_number: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One buffer's batches: (indices, offsets) in buffer positions, in the order to
        emit them, and the positions carried into the next buffer (none when `last`)."""
        raise NotImplementedError

    def _batches(self, source: Any, whole: Any = None) -> Iterator[list[Any]]:
        """Every batch of the epoch, in order, as every reader of `source` makes them (the
        stream, or this reader's shards of it, when `whole` is the stream they are shards of):
        `source` read `buffer` rows at a time (the rows the previous buffer carried first),
        each buffer planned by `_plan`."""
        epoch = self.epoch
        rows: list[Any] = []
        sizes: list[int] = []
        position = 0
        buffer_number = 0
        source = rows_of(source)
        exhausted = False
        while not exhausted:
            for row in source:
                try:
                    row, size = self._size(row, position)
                except (TypeError, ValueError):
                    if whole is None:
                        raise
                    # Named by its place in the stream, not in this reader's shards.
                    self._size(row, stream_position(whole, row, position))
                    raise
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
        source = self.iterable
        own_shards = reads_own_shards(source, self.read_shards, sharding, name, ranks, workers)
        if own_shards:
            source = reader_shards(source, ranks * workers, self.rank * workers + worker_id)
            sharding = True  # this reader's own rows
        (ranks_dealt, rank_place), (workers_dealt, worker_place) = dealt_out(
            sharding, ranks, self.rank, workers, worker_id)
        here = [self.rank * workers + worker_id, ranks * workers]
        place, self._place = self._place, None
        if place is not None and place["epoch"] != self.epoch:
            place = None  # saved in another epoch (set_epoch was seen by the main process only)
        if place is not None and place["reader"] is not None and place["reader"] != here:
            saved = place["reader"]
            raise ValueError(
                f"{name}: the place given to load_state_dict was saved by reader {saved[0]} of "
                f"{saved[1]} (rank x DataLoader workers + worker), but this is reader {here[0]} "
                f"of {here[1]}, whose batches differ: resume with the ranks and num_workers "
                "it was saved with"
            )
        self._reader = here
        if place is not None and place["complete"]:
            self._yielded, self._complete = place["batches"], True
            return iter(())  # the epoch was over: nothing left of it here
        skip = place["batches"] if place is not None else 0
        batches = self._batches(source, self.iterable if own_shards else None)
        batches = deal_to_ranks(batches, ranks_dealt, rank_place, self.drop_last)
        batches = deal_to_workers(batches, workers_dealt, worker_place)
        if ranks == 1 or sharding not in ("rank", True):
            return self._counted(batches, skip)  # every rank deals out the same batches
        # Each rank packs its own rows (a source split by rank): the ranks' batch counts are
        # evened out by a collective, which only the process holding the process group can run.
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
        if skip > self._yielded:
            # Checked once the epoch's end is known: loaded and nothing yielded, the place
            # claims batches this reader's epoch does not have.
            total = self._yielded
            self._yielded, self._complete = 0, False
            raise ValueError(
                f"{type(self).__name__}.load_state_dict: 'batches'={skip} is past the end of "
                f"epoch {self.epoch}, which has {total} batch(es) for reader "
                f"{self._reader}; the place was saved from another source or stream"
            )
