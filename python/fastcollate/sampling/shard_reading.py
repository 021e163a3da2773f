"""Whether each reader of a buffered stream (each DataLoader worker of each rank) reads only its
own shards of the source, and that share: `read_shards=`.

Read whole, every reader reads and decodes every row and keeps its share of the batches. A
`datasets.IterableDataset` made of at least as many shards (files, or `to_iterable_dataset`
pieces) as there are DataLoader workers can give each worker only its shards instead, which it
then packs or groups by itself. The workers' batch counts then differ, which is harmless within
one rank (the DataLoader takes whatever its workers yield), but ranks must yield equally many
batches: ranks that each packed their own shards could only be evened out by repeating or
dropping rows. So shards are read apart only on one rank, where every row stays in exactly one
batch; on several ranks every reader reads every row, and `read_shards=True` is refused there.
Whether it can be honoured is a fact about the source and the readers, never a guess."""

from __future__ import annotations

import sys
from typing import Any


def checked_shard_reading(value: Any) -> bool | None:
    """`value` if it is True, False or None (decide from the source); a ValueError otherwise."""
    if value is None or value is True or value is False:
        return value
    raise ValueError(
        "read_shards must be True (each reader reads only its own shards of the source), False "
        f"(every reader reads every row) or None (True where the source allows it), not {value!r}"
    )


def shard_count(source: Any) -> int | None:
    """How many shards a whole (not already split) `datasets.IterableDataset` has; None for any
    other source, whose shards fastcollate cannot ask for."""
    datasets = sys.modules.get("datasets")
    if datasets is None or not isinstance(source, datasets.IterableDataset):
        return None
    if getattr(source, "_distributed", None) is not None:
        return None  # split with split_dataset_by_node: this rank's share already
    if not hasattr(source, "shard"):
        return None  # a datasets release without IterableDataset.shard
    # `num_shards` in current datasets, `n_shards` before it.
    return int(getattr(source, "num_shards", None) or source.n_shards)


def check_shard_reading(source: Any, read_shards: bool | None, source_sharded: Any,
                        stream: str, ranks: int) -> None:
    """Called when the stream is made: a ValueError when `read_shards=True` cannot be honoured
    with what is known then (the source, the ranks; DataLoader workers come later)."""
    if read_shards is not True:
        return
    if source_sharded not in (None, False):
        raise ValueError(
            f"{stream}: read_shards=True splits a source that yields every row by shard, but "
            f"source_sharded={source_sharded!r} says it is split already; pass one of them"
        )
    shards = shard_count(source)
    if shards is None:
        raise ValueError(
            f"{stream}: read_shards=True needs a whole datasets.IterableDataset (load_dataset(..., "
            "streaming=True) over several files, or Dataset.to_iterable_dataset(num_shards=...)) "
            f"to ask for shards, not {what_source(source)}; pass read_shards=False, or split "
            "the source yourself and say so with source_sharded="
        )
    if ranks > 1:
        raise ValueError(
            f"{stream}: read_shards=True on {ranks} ranks would have each rank pack only its "
            "own shards, and the ranks' batch counts would differ; a DDP step needs as many on "
            "every rank, and evening them out would repeat or drop rows. On several ranks "
            "every reader reads every row and keeps its own batches (each row once per epoch): "
            "pass read_shards=None or False (read_shards=True works on one rank with several "
            "DataLoader workers)"
        )


def what_source(source: Any) -> str:
    datasets = sys.modules.get("datasets")
    if datasets is not None and isinstance(source, datasets.IterableDataset):
        return "a datasets.IterableDataset split with split_dataset_by_node"
    return f"a {type(source).__name__}"


def reads_own_shards(source: Any, read_shards: bool | None, sharding: Any, stream: str,
                     ranks: int, workers: int) -> bool:
    """Called when a reader starts iterating: whether it reads only its own shards.
    `sharding` is the source's (source_sharded, said or read off it). `read_shards=None` is
    True exactly when every row then stays in exactly one batch: a whole `datasets` stream on
    one rank, read by several DataLoader workers, at least one shard each."""
    if read_shards is False:
        return False
    shards = shard_count(source) if sharding is False else None
    if read_shards is None:
        return ranks == 1 and workers > 1 and shards is not None and shards >= workers
    if shards is None:
        raise ValueError(
            f"{stream}: read_shards=True needs a whole datasets.IterableDataset that yields every "
            f"row (source_sharded=False), not {what_source(source)} whose sharding is "
            f"{sharding!r}; pass read_shards=False"
        )
    if shards < ranks * workers:
        raise ValueError(
            f"{stream}: read_shards=True needs at least one shard per reader, but the source has "
            f"{shards} shard(s) for {ranks} rank(s) x {workers} DataLoader worker(s); use fewer "
            "workers, give the source more shards, or pass read_shards=False"
        )
    return True


def reader_shards(source: Any, readers: int, reader: int) -> Any:
    """Reader `reader`'s share of a whole `datasets.IterableDataset`: shards `reader`,
    `reader + readers`, ... (so every shard is read by exactly one reader), at the source's
    epoch (a shuffled source shuffles each share as it would the whole)."""
    share = source.shard(num_shards=readers, index=reader, contiguous=False)
    share.set_epoch(source.epoch)
    return share
