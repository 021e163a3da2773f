"""Rank-aware batch samplers under `accelerator.prepare`: the rank and world size a sampler
infers when not given, and how it keeps accelerate from sharding it a second time.

accelerate 1.15's `prepare_data_loader` wraps every DataLoader's batch sampler in a
`BatchSamplerShard` when there is more than one process (it has no way to opt out), and the
shard keeps batch `i` of the wrapped sampler on process `i % num_processes`. A sampler that has
already picked this rank's batches loses all but every `num_processes`-th of them that way
(transformers' Trainer resets the shard to one process after `prepare`; a user's loop does not).
So while a shard of its own rank and world size iterates it, a rank-aware sampler yields each
of its batches `num_processes` times in a row: the shard keeps exactly one copy of each, and
the prepared loader yields what the sampler alone would."""

from __future__ import annotations

import sys
from typing import Any

from .._internal.options import checked_count


def checked_world(num_replicas: int | None, rank: int | None) -> tuple[int, int]:
    """`num_replicas` and `rank`, each taken from torch.distributed's process group when None
    (and it is initialized: accelerate and torchrun scripts start it), else 1 and 0; checked
    to be integers with 0 <= rank < num_replicas."""
    torch = sys.modules.get("torch")
    distributed: Any = getattr(torch, "distributed", None) if torch is not None else None
    initialized = (
        distributed is not None and distributed.is_available() and distributed.is_initialized()
    )
    if num_replicas is None:
        num_replicas = distributed.get_world_size() if initialized else 1
    if rank is None:
        rank = distributed.get_rank() if initialized else 0
    num_replicas = checked_count(num_replicas, "num_replicas", 1)
    rank = checked_count(rank, "rank", 0)
    if rank >= num_replicas:
        raise ValueError(f"rank {rank} is outside [0, {num_replicas}) (num_replicas)")
    return num_replicas, rank


def shard_of(frame: Any) -> Any:
    """The accelerate `BatchSamplerShard` running `frame` (one of its methods), or None.
    accelerate is never imported here: if it is not loaded, no shard exists."""
    module = sys.modules.get("accelerate.data_loader")
    shard_type = getattr(module, "BatchSamplerShard", None)
    if shard_type is None or frame is None:
        return None
    owner = frame.f_locals.get("self")
    return owner if isinstance(owner, shard_type) else None


def copies_per_batch(sampler: str, num_replicas: int, rank: int) -> int:
    """Called from a sampler's `__iter__` or `__len__`: how many times it must repeat each
    batch for the accelerate shard that iterates it (if any) to pass every batch on exactly
    once. A sampler built for one process is an ordinary batch sampler: accelerate's own
    sharding then deals its batches out.
    (`split_batches=True` never gets here: accelerate refuses a batch sampler without a fixed
    `batch_size` when preparing the loader.)"""
    # Frames: 0 this function, 1 the sampler's __iter__ / __len__, 2 whoever called that.
    shard = shard_of(sys._getframe(2))
    if shard is None or shard.num_processes == 1 or num_replicas == 1:
        return 1
    if shard.num_processes != num_replicas or shard.process_index != rank:
        raise ValueError(
            f"{sampler} was built for rank {rank} of {num_replicas}, but accelerate runs it on "
            f"process {shard.process_index} of {shard.num_processes}: give it "
            "rank=accelerator.process_index and the number of processes "
            "(accelerator.num_processes)"
        )
    return num_replicas


def check_not_resharded(stream: str, num_replicas: int, frame: Any) -> None:
    """Called from a rank-aware stream's `set_epoch` or `__iter__` with its caller's `frame`:
    a ValueError when that caller is accelerate re-sharding the stream on several processes.

    accelerate 1.15's `prepare_data_loader` hands a DataLoader over a torch `IterableDataset` on
    more than one process either to a `DataLoaderDispatcher` (the default: process 0 reads the
    loader, which holds only rank 0's batches, and sends the others slices of them) or, with
    `dispatch_batches=False`, to a `DataLoaderShard` over an `IterableDatasetShard` (each
    process keeps a slice of its own batches). Either way batches are lost without a word. Both
    call the stream's `set_epoch` on every process, in the main process, before the first batch
    (the `IterableDatasetShard` also iterates it, in a worker when there are workers), so the
    stream can refuse there. accelerate is never imported here."""
    module = sys.modules.get("accelerate.data_loader")
    if module is None or frame is None or num_replicas == 1:
        return
    owner = frame.f_locals.get("self")
    dispatcher = getattr(module, "DataLoaderDispatcher", None)
    shard = getattr(module, "IterableDatasetShard", None)
    if dispatcher is not None and isinstance(owner, dispatcher):
        processes = owner.state.num_processes
        what = ("dispatch its batches from process 0, which holds only the batches of rank 0 "
                "(dispatch_batches=True, accelerate's default for a stream)")
    elif shard is not None and isinstance(owner, shard):
        processes = owner.num_processes
        what = ("cut each process's batches into per-process slices a second time "
                "(IterableDatasetShard, with dispatch_batches=False)")
    else:
        return
    if processes == 1:
        return
    raise ValueError(
        f"{stream} was prepared by accelerate on {processes} processes: accelerate would "
        f"{what}, and rows would be lost. {stream} already gives each rank its own batches: "
        "iterate the DataLoader without accelerator.prepare and move each batch to "
        "accelerator.device yourself, or train with fastcollate.Trainer, which prepares it "
        "without re-sharding"
    )
