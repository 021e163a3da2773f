"""Which share of the rows a buffered stream's source yields in each reader (each DataLoader
worker of each rank): every row, this rank's rows, this worker's rows, or this reader's own.

A stream that deals its batches out to the readers must know it: dealing out a source that was
already split keeps 1/n of a share that was already this reader's, and rows are lost without a
word. What can be known without reading is read off the source (a `datasets` stream and its
`split_dataset_by_node` config, a Ray Data iterator, the source's own `source_sharded`
attribute); for the rest, when several readers exist, the stream refuses and names the
`source_sharded=` argument that says it. Nothing is guessed from the rows."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

# The values `source_sharded=` takes: False, every reader sees every row (the stream deals the
# batches out to ranks x workers); "rank", each rank's rows, the same in each of its DataLoader
# workers (dealt out to the workers); "worker", each DataLoader worker's rows, the same on
# every rank (dealt out to the ranks); True, each reader's own rows (nothing dealt out).
SHARDINGS = (False, "rank", "worker", True)


def checked_sharding(value: Any) -> Any:
    """`value` if it is one of SHARDINGS or None (not said); a ValueError otherwise."""
    if value is None or any(value is option or (isinstance(value, str) and value == option)
                            for option in SHARDINGS):
        return value
    raise ValueError(
        f"source_sharded must be False (every reader reads every row), 'rank' (the source "
        "yields each rank its own rows), 'worker' (each DataLoader worker its own rows), or "
        f"True (each reader, rank and worker, its own rows), not {value!r}"
    )


def declared_sharding(source: Any) -> tuple[Any, str]:
    """How `source` is sharded as far as it can be known without reading it, and what it is
    in words: (one of SHARDINGS, ...) or (None, ...) when it cannot be known."""
    declared = checked_sharding(getattr(source, "source_sharded", None))
    if declared is not None:
        return declared, f"{type(source).__name__} (its source_sharded attribute)"
    datasets = sys.modules.get("datasets")
    if datasets is not None and isinstance(source, datasets.IterableDataset):
        # Read with `iter()`, which a DataLoader worker does not split further.
        if getattr(source, "_distributed", None) is not None:
            return "rank", "a datasets.IterableDataset split with split_dataset_by_node"
        return False, "a datasets.IterableDataset"
    ray_data = sys.modules.get("ray.data")
    iterator_type = getattr(ray_data, "DataIterator", None)
    if iterator_type is not None and isinstance(source, iterator_type):
        split_module = sys.modules.get("ray.data._internal.iterator.stream_split_iterator")
        split_type = getattr(split_module, "StreamSplitDataIterator", None)
        if split_type is not None and isinstance(source, split_type):
            return "rank", "a Ray Data shard (get_dataset_shard / streaming_split)"
        return False, "a Ray Data iterator over a whole dataset"
    dataset_type = getattr(ray_data, "Dataset", None)
    if dataset_type is not None and isinstance(source, dataset_type):
        return False, "a Ray Data Dataset"
    if isinstance(source, Sequence):
        # The same rows wherever it is read: a DataLoader worker gets a copy of it.
        return False, f"a {type(source).__name__} of rows"
    return None, f"a {type(source).__name__}"


def sharding_for(source: Any, given: Any, stream: str, ranks: int, workers: int) -> Any:
    """The sharding a stream over `source` works with: `given` when said, else the declared
    one; with several readers and nothing known, a ValueError naming `source_sharded=`."""
    if given is not None:
        return given
    known, what = declared_sharding(source)
    if known is not None:
        return known
    if ranks == 1 and workers == 1:
        return False  # one reader: every row it reads is its own
    readers = []
    if ranks > 1:
        readers.append(f"{ranks} ranks")
    if workers > 1:
        readers.append(f"{workers} DataLoader workers")
    raise ValueError(
        f"{stream}: the stream is read by {' x '.join(readers)}, and it cannot tell whether its "
        f"source ({what}) yields every row in each of them or has already been split (by "
        "rank, or by DataLoader worker through get_worker_info()); dealing out a split source "
        "again would lose rows. Say which: source_sharded=False (every reader sees every row), "
        "'rank', 'worker' or True (each reader only its own rows)"
    )


def dealt_out(sharding: Any, ranks: int, rank: int, workers: int,
              worker: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """Under `sharding`, ((how many ranks the batches are dealt out to, which one this is),
    (how many DataLoader workers this rank's batches are dealt out to, which one this is));
    (1, 0) where nothing is dealt out at that level."""
    to_ranks = (ranks, rank) if sharding is False or sharding == "worker" else (1, 0)
    to_workers = (workers, worker) if sharding is False or sharding == "rank" else (1, 0)
    return to_ranks, to_workers
