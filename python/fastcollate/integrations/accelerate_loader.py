"""`fastcollate.prepare(accelerator, loader)`: `accelerator.prepare` for a DataLoader in a
hand-written accelerate loop, which leaves a loader that already yields only this rank's
batches (a `PackedStream` / `LengthGroupedStream`, a rank-aware sampler) unsharded.

accelerate's `prepare` shards every loader it is given when there are several processes: it
deals a batch sampler's batches out to the processes, and it dispatches a stream's batches
from process 0 or, with `dispatch_batches=False`, slices each process's batches again. A
loader that is this rank's share already loses rows either way, and accelerate has no way to
opt out per loader. accelerate is imported when `prepare` is called."""

from __future__ import annotations

from typing import Any

from .._internal.upstream import ACCELERATOR_DATALOADERS
from ..sampling.buffered_stream import BufferedStream


def rank_aware_world(loader: Any) -> tuple[str, int, int] | None:
    """(what, num_replicas, rank) when `loader` yields only one rank's batches already: its
    dataset is a buffered stream, or its batch sampler or sampler is rank-aware (fastcollate's
    batch samplers, a `DistributedSampler`, `DistributedLengthGroupedSampler`); else None."""
    dataset = getattr(loader, "dataset", None)
    if isinstance(dataset, BufferedStream):
        return type(dataset).__name__, dataset.num_replicas, dataset.rank
    for sampler in (getattr(loader, "batch_sampler", None), getattr(loader, "sampler", None)):
        replicas = getattr(sampler, "num_replicas", getattr(sampler, "dp_size", None))
        rank = getattr(sampler, "rank", None)
        if isinstance(replicas, int) and isinstance(rank, int):
            return type(sampler).__name__, replicas, rank
    return None


def prepare_rank_aware_loader(accelerator: Any, loader: Any) -> Any:
    """`accelerator.prepare(loader)` for a loader that already yields only this rank's batches:
    device placement, `set_epoch` and the end-of-epoch signal as usual, but no second
    sharding."""
    from accelerate.data_loader import prepare_data_loader

    prepared = prepare_data_loader(
        loader,
        accelerator.device,
        num_processes=1,
        process_index=0,
        split_batches=False,
        put_on_device=accelerator.device_placement,
        rng_types=list(accelerator.rng_types),
        dispatch_batches=False,
        non_blocking=accelerator.non_blocking,
        use_stateful_dataloader=accelerator.use_stateful_dataloader,
    )
    getattr(accelerator, ACCELERATOR_DATALOADERS).append(prepared)
    return prepared


def prepare(accelerator: Any, loader: Any) -> Any:
    """Prepares `loader` for `accelerator` as `accelerator.prepare(loader)` does (device
    placement, `set_epoch`, the end-of-epoch signal for gradient accumulation), except that a
    loader that already yields only this rank's batches is not sharded again: a DataLoader
    over a `PackedStream` or `LengthGroupedStream`, or with a rank-aware sampler or batch
    sampler (`PackedBatchSampler`, `BatchRebalanceSampler`, `DistributedLengthGroupedSampler`,
    torch's `DistributedSampler`). Any other loader goes to `accelerator.prepare`, which shards
    it. A rank-aware loader built for another world size or rank than the accelerator's is a
    ValueError."""
    world = rank_aware_world(loader)
    if world is None:
        return accelerator.prepare(loader)
    what, replicas, rank = world
    if (replicas, rank) != (accelerator.num_processes, accelerator.process_index):
        raise ValueError(
            f"the loader's {what} was built for rank {rank} of {replicas}, but the accelerator "
            f"runs process {accelerator.process_index} of {accelerator.num_processes}: give it "
            "num_replicas=accelerator.num_processes and rank=accelerator.process_index"
        )
    return prepare_rank_aware_loader(accelerator, loader)
