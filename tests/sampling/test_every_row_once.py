"""Every row of a `datasets` stream in exactly one batch per epoch, across every reader of a
`PackedStream` / `LengthGroupedStream` (ranks x DataLoader workers), for 1-8 shards and 1-8
readers, with the default `read_shards=None`: every rank yields as many batches, no row twice,
and none left out — with `drop_last=True`, only the last round of fewer batches than ranks
(as accelerate's `IterableDatasetShard` drops its last incomplete round), and, in a
LengthGroupedStream, each sequence's incomplete last batch (as a DataLoader drops it).

Ranks are simulated in this process (`num_replicas=`, `rank=`, no process group); DataLoader
workers are simulated too (tests/support/stream_readers.py) over the whole grid, and real
(forked) for a few cases, which must give the simulated batches."""

from __future__ import annotations

import multiprocessing
from collections import Counter

import pytest

from tests.support.stream_readers import (
    loaded_rank,
    make_stream,
    sharded_source,
    simulated_rank,
)

ROWS = 300
BATCH = 4  # LengthGroupedStream's batch size (make_stream's default)


def read_epoch(kind, shards, ranks, workers, drop_last, read=simulated_rank):
    """Each rank's batches (row numbers) in epoch 1."""
    source = sharded_source(ROWS, shards)
    per_rank = []
    for rank in range(ranks):
        stream = make_stream(kind, source, num_replicas=ranks, rank=rank, drop_last=drop_last)
        stream.set_epoch(1)
        per_rank.append(read(stream, workers))
    return per_rank


def dropped_by_accelerate(kind, shards, ranks):
    """The rows one reader's epoch leaves out with drop_last (a LengthGroupedStream's
    incomplete last batch), and those of the last round of fewer batches than ranks."""
    alone = read_epoch(kind, shards, 1, 0, True)[0]
    whole = len(alone) - len(alone) % ranks
    return set(range(ROWS)) - {row for batch in alone[:whole] for row in batch}


def check(kind, shards, ranks, workers, drop_last, per_rank):
    assert len({len(batches) for batches in per_rank}) == 1, "every rank as many batches"
    seen = Counter(row for batches in per_rank for batch in batches for row in batch)
    assert all(batch for batches in per_rank for batch in batches), "no empty batch"
    twice = sorted(row for row, count in seen.items() if count > 1)
    assert not twice, f"rows in more than one batch: {twice[:10]}"
    missing = set(range(ROWS)) - set(seen)
    if not drop_last:
        assert not missing, f"rows left out: {sorted(missing)[:10]}"
    elif ranks == 1 and workers > 1 and shards >= workers:
        # Each worker groups its own shards: a LengthGroupedStream drops each worker's
        # incomplete last batch, as a DataLoader with workers does; a PackedStream nothing.
        assert len(missing) < (workers * BATCH if kind == "grouped" else 1)
    else:
        assert missing == dropped_by_accelerate(kind, shards, ranks)


SUBSET = {(3, 2, 0), (3, 2, 2), (8, 1, 2), (5, 3, 0), (2, 4, 2), (7, 8, 0), (1, 1, 2)}


def grid():
    for shards in range(1, 9):
        for ranks, workers in [(r, 0) for r in range(1, 9)] + [(r, 2) for r in range(1, 5)]:
            for kind in ("packed", "grouped"):
                for drop_last in (False, True):
                    marks = () if (shards, ranks, workers) in SUBSET else (pytest.mark.slow,)
                    yield pytest.param(kind, shards, ranks, workers, drop_last, marks=marks,
                                       id=f"{kind}-{shards}shards-{ranks}x{workers}-"
                                          f"{'drop' if drop_last else 'keep'}")


@pytest.mark.parametrize(("kind", "shards", "ranks", "workers", "drop_last"), list(grid()))
def test_every_row_once_per_epoch(kind, shards, ranks, workers, drop_last):
    check(kind, shards, ranks, workers, drop_last,
          read_epoch(kind, shards, ranks, workers, drop_last))


REAL = [("packed", 3, 2, False), ("grouped", 3, 2, True), ("packed", 8, 1, True),
        ("grouped", 5, 1, False)]


@pytest.mark.multiprocess
@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(),
                    reason="the fork start method is unavailable on this platform")
@pytest.mark.parametrize(("kind", "shards", "ranks", "drop_last"), REAL)
def test_real_dataloader_workers(kind, shards, ranks, drop_last):
    """Two forked DataLoader workers per rank give the batches the simulation gives."""
    real = read_epoch(kind, shards, ranks, 2, drop_last, read=loaded_rank)
    assert real == read_epoch(kind, shards, ranks, 2, drop_last)
    check(kind, shards, ranks, 2, drop_last, real)


def test_the_issue_case_three_shards_two_ranks():
    """3 shards of 1,000 rows on 2 ranks: before, rank 0 read 667 rows and rank 1 333, and
    evening the counts out repeated hundreds of rows (or, with drop_last, left 344 out)."""
    for drop_last in (False, True):
        source = sharded_source(1000, 3)
        per_rank = []
        for rank in range(2):
            stream = make_stream("packed", source, num_replicas=2, rank=rank,
                                 drop_last=drop_last)
            per_rank.append(simulated_rank(stream, 0))
        seen = Counter(row for batches in per_rank for batch in batches for row in batch)
        assert len(per_rank[0]) == len(per_rank[1])
        assert max(seen.values()) == 1
        assert len(seen) == 1000 if not drop_last else len(seen) >= 1000 - 64
