"""The collate_fn `fastcollate.Trainer` hands each DataLoader it builds: the Trainer's collator,
called with the batch's place (`BatchPlace`: which loader, which epoch, which position in the
epoch) set, so that seeded native masks are a function of (seed, loader, epoch, position)
wherever the seeded collator sits (itself, wrapped, a partial, a lambda) and of nothing that
ran before: evaluation leaves the training masks as they were, and a run resumed from a
checkpoint masks the batches it trains as the uninterrupted run does."""

from __future__ import annotations

import multiprocessing as mp
import multiprocessing.context
from typing import Any, cast

import numpy as np
import torch

from ..collators.masking import BATCH_PLACE, BatchPlace
from .cpu_batches import sent_to_device

TRAIN, EVAL, TEST = 0, 1, 2
_WORKER_SHIFT = 16


class LoaderPlaces:
    """What the Trainer tells the collate_fns of its loaders, in memory shared with DataLoader
    workers (inherited on fork, handed over on spawn / forkserver): the training loop's epoch,
    the position the training DataLoader's first batch has in that epoch (the batches a resumed
    epoch skips without collating them), and a count of epochs started (the main process
    restarts its batch count when it changes)."""

    EPOCH, START, STARTS = 0, 1, 2

    def __init__(self) -> None:
        self._raw = mp.RawArray("q", 3)
        self.cells = np.frombuffer(self._raw, dtype=np.int64)

    def __getstate__(self) -> dict[str, Any]:
        if multiprocessing.context.get_spawning_popen() is not None:
            return {"raw": self._raw}  # a DataLoader worker being started: the same memory
        return {"values": [int(v) for v in self.cells]}

    def __setstate__(self, state: dict[str, Any]) -> None:
        if "raw" in state:
            self._raw = state["raw"]
            self.cells = np.frombuffer(self._raw, dtype=np.int64)
        else:
            cast(Any, self).__init__()  # re-initialised in place
            self.cells[:] = state["values"]

    def start_epoch(self, epoch: int, start: int) -> None:
        """Called before the epoch's DataLoader is iterated (its workers read this)."""
        self.cells[self.EPOCH] = epoch
        self.cells[self.START] = start
        self.cells[self.STARTS] += 1

    @property
    def epoch(self) -> int:
        return int(self.cells[self.EPOCH])


class PlacedCollate:
    """`collate_fn(features)` called with the batch's place set (see the module). A map-style
    loader's batch position is the loader's own count (in a DataLoader worker: worker id + batch
    count x workers, the order in which a DataLoader hands batches out) from the position its
    first batch has; an iterable loader's batches are placed per DataLoader worker, which
    reads its own part of the stream. Picklable for spawned workers when `collate_fn` is."""

    def __init__(self, collate_fn: Any, stream: int, places: LoaderPlaces, *,
                 map_style: bool) -> None:
        self.collate_fn = collate_fn
        self.stream = stream
        self.places = places
        self.map_style = map_style
        # (device, non_blocking) where this collate_fn makes the loader's send to the CPU
        # (`cpu_batches.take_over_cpu_placement`), else None.
        self.send_to: tuple[Any, bool] | None = None
        self._reset_state()

    def _reset_state(self) -> None:
        self._count = 0
        self._seen: int | None = None  # the epoch start or DataLoader iteration counted in

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_count"], state["_seen"] = 0, None
        return state

    @property
    def accepts_arrow_batches(self) -> bool:
        return getattr(self.collate_fn, "accepts_arrow_batches", False) is True

    def _iteration(self) -> tuple[int, int, int]:
        """(what identifies the DataLoader iteration, worker id, workers) in this process."""
        info = torch.utils.data.get_worker_info()
        if info is None or mp.current_process().name == "MainProcess":
            starts = int(self.places.cells[LoaderPlaces.STARTS]) if self.stream == TRAIN else 0
            return starts, 0, 1
        # Each iter(loader) draws a new base seed for its workers (worker seed - worker id).
        return int(info.seed) - int(info.id), int(info.id), int(info.num_workers)

    def place(self) -> BatchPlace:
        """The place of the batch this call collates (and counts it)."""
        seen, worker, workers = self._iteration()
        if seen != self._seen:
            self._seen, self._count = seen, 0
        count = self._count
        self._count += 1
        start = int(self.places.cells[LoaderPlaces.START]) if self.stream == TRAIN else 0
        if self.map_style:
            return BatchPlace(self.stream, self.places.epoch, start + worker + count * workers)
        return BatchPlace(self.stream | ((worker + 1) << _WORKER_SHIFT), self.places.epoch,
                          start + count)

    def __call__(self, features: Any) -> Any:
        token = BATCH_PLACE.set(self.place())
        try:
            batch = self.collate_fn(features)
        finally:
            BATCH_PLACE.reset(token)
        send_to = self.send_to
        if send_to is None:
            return batch
        return sent_to_device(batch, *send_to)

    def __repr__(self) -> str:
        return f"PlacedCollate({self.collate_fn!r}, stream={self.stream})"
