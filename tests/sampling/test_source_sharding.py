"""Already-split sources are never split again: `PackedStream` and `LengthGroupedStream` over a
torch IterableDataset that splits itself by DataLoader worker (0, 1, 2 workers), over
`datasets` streams split with `split_dataset_by_node`, and over sources they cannot see into
(refused with several readers, naming `source_sharded=`). Ray Data shards under Ray Train:
tests/integrations/test_ray_streams.py."""

from __future__ import annotations

from collections import Counter

import datasets
import pytest
import torch
from datasets.distributed import split_dataset_by_node

import fastcollate

pytestmark = pytest.mark.multiprocess

ROWS = 301


def make_rows(count: int) -> list[dict]:
    return [{"input_ids": list(range(1, 2 + (i * 7) % 40)), "row": i} for i in range(count)]


class WorkerSplitRows(torch.utils.data.IterableDataset):
    """The usual self-splitting stream: DataLoader worker w of n yields rows w, w + n, ..."""

    def __init__(self, rows: list[dict]):
        self.rows = rows

    def __iter__(self):
        worker = torch.utils.data.get_worker_info()
        if worker is None:
            return iter(self.rows)
        return iter(self.rows[worker.id::worker.num_workers])


def make_stream(kind: str, source, **options):
    if kind == "packed":
        return fastcollate.PackedStream(source, 64, buffer=32, seed=3, **options)
    return fastcollate.LengthGroupedStream(source, 4, buffer=32, seed=3, **options)


def loaded_rows(stream, workers: int) -> Counter:
    loader = torch.utils.data.DataLoader(stream, batch_size=None, num_workers=workers,
                                         collate_fn=lambda batch: batch)
    return Counter(row["row"] for batch in loader for row in batch)


@pytest.mark.parametrize("kind", ["packed", "grouped"])
@pytest.mark.parametrize("workers", [0, 1, 2])
def test_worker_splitting_dataset_every_row_once(kind, workers):
    source = WorkerSplitRows(make_rows(ROWS))
    # Said: each worker's rows are its own. Not said: one reader needs nothing.
    for stream in [make_stream(kind, source, source_sharded="worker")] + (
        [make_stream(kind, source)] if workers < 2 else []
    ):
        assert loaded_rows(stream, workers) == Counter(range(ROWS))


@pytest.mark.parametrize("kind", ["packed", "grouped"])
def test_worker_splitting_dataset_refused_when_not_said(kind):
    stream = make_stream(kind, WorkerSplitRows(make_rows(ROWS)))
    with pytest.raises(ValueError, match=r"read by 2 DataLoader workers.*source_sharded=False"):
        loaded_rows(stream, 2)


@pytest.mark.parametrize("kind", ["packed", "grouped"])
def test_declared_sharding_is_read_off_the_source(kind):
    source = WorkerSplitRows(make_rows(ROWS))
    source.source_sharded = "worker"
    assert loaded_rows(make_stream(kind, source), 2) == Counter(range(ROWS))


@pytest.mark.parametrize("kind", ["packed", "grouped"])
def test_stream_split_by_node_is_dealt_to_workers_only(kind):
    """Each simulated rank reads its split_dataset_by_node share (no process group: nothing
    exchanged), and its two DataLoader workers deal its batches out: every row once."""
    source = datasets.Dataset.from_list(make_rows(ROWS)).to_iterable_dataset(num_shards=4)
    seen = Counter()
    for rank in range(2):
        split = split_dataset_by_node(source, rank=rank, world_size=2)
        stream = make_stream(kind, split, num_replicas=2, rank=rank)
        mine = loaded_rows(stream, 2)
        mine_alone = loaded_rows(make_stream(kind, split, num_replicas=2, rank=rank), 0)
        assert set(mine) == set(mine_alone)
        # The workers' uneven last round repeats at most a first batch's rows.
        assert sum(mine.values()) - len(mine) <= 64
        seen.update(set(mine))
    assert seen == Counter(range(ROWS))


def test_sources_that_cannot_be_known_are_refused_on_several_ranks():
    def rows():
        yield from make_rows(10)

    with pytest.raises(ValueError, match=r"read by 2 ranks.*\(a generator\).*source_sharded="):
        fastcollate.PackedStream(rows(), 64, num_replicas=2, rank=0)
    with pytest.raises(ValueError, match="read by 2 ranks.*source_sharded="):
        fastcollate.LengthGroupedStream(WorkerSplitRows([]), 4, num_replicas=2, rank=1)
    # Said: a generator of this rank's rows, with no process group, yields all of them.
    alone = fastcollate.PackedStream(rows(), 64, num_replicas=2, rank=1, source_sharded=True)
    assert sorted(row["row"] for batch in alone for row in batch) == list(range(10))
    # A list is the same rows wherever it is read: dealt out to the ranks.
    per_rank = [list(fastcollate.PackedStream(make_rows(40), 64, num_replicas=2, rank=rank))
                for rank in range(2)]
    assert len(per_rank[0]) == len(per_rank[1])


def test_bad_source_sharded():
    with pytest.raises(ValueError, match=r"source_sharded must be False.*not 'ranks'"):
        fastcollate.PackedStream(make_rows(3), 64, source_sharded="ranks")
    with pytest.raises(ValueError, match="source_sharded must be"):
        fastcollate.LengthGroupedStream(make_rows(3), 2, source_sharded=1)
