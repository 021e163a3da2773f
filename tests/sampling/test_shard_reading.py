"""`read_shards=`: each reader (rank x DataLoader worker) of a `PackedStream` /
`LengthGroupedStream` over a whole `datasets.IterableDataset` with at least one shard per reader
reads only its own shards and packs or groups them by itself — on one rank, where the workers'
counts need not match; on several ranks every reader reads every row, so that each row stays in
one batch. Checked: every row once per epoch across 1, 2 and 4 ranks with 0, 1 and 2 DataLoader
workers; each reader reads its share of the rows (rows counted as the source hands them out);
the automatic choice; two forked ranks with a process group; every option that cannot be
honoured refused with the argument to change."""

from __future__ import annotations

import json
import multiprocessing
import os
from collections import Counter

import datasets
import pytest
import torch
from datasets.distributed import split_dataset_by_node

import fastcollate

# DataLoader workers and ranks are forked here: the rows-read counter below is inherited
# shared memory, and the ranks' loop is a local function.
pytestmark = [
    pytest.mark.multiprocess,
    pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(),
                       reason="the fork start method is unavailable on this platform"),
]

ROWS = 96
SHARDS = 8
BUDGET = 64
BATCH = 4

# Rows handed out by the source, per DataLoader worker (slot 0 without workers): in shared
# memory, so that forked workers count into it.
READS = torch.zeros(SHARDS, dtype=torch.int64).share_memory_()


def count_read(row):
    worker = torch.utils.data.get_worker_info()
    READS[worker.id if worker is not None else 0] += 1
    return row


def source(shards=SHARDS, rows=ROWS):
    table = {"input_ids": [[7] * (1 + (i * 13) % 40) for i in range(rows)],
             "row": list(range(rows))}
    return datasets.Dataset.from_dict(table).to_iterable_dataset(num_shards=shards).map(count_read)


def make(kind, data, **options):
    if kind == "packed":
        return fastcollate.PackedStream(data, BUDGET, buffer=16, seed=4, **options)
    return fastcollate.LengthGroupedStream(data, BATCH, buffer=16, seed=4, **options)


def loaded(stream, workers):
    """The row numbers of every batch a DataLoader over `stream` yields."""
    loader = torch.utils.data.DataLoader(stream, batch_size=None, num_workers=workers,
                                         collate_fn=lambda rows: [r["row"] for r in rows])
    return list(loader)


# Every count of ranks and workers packed; grouped (the same reading code) at three of them.
CASES = [("packed", ranks, workers) for ranks in (1, 2, 4) for workers in (0, 1, 2)] + [
    ("grouped", 1, 2), ("grouped", 2, 0), ("grouped", 4, 2)]


@pytest.mark.parametrize(("kind", "ranks", "workers"), CASES)
def test_every_row_once_and_each_reader_reads_its_share(kind, ranks, workers):
    data = source()
    seen = Counter()
    counts = set()
    for rank in range(ranks):
        READS.zero_()
        # Simulated ranks (no process group); read_shards left at None.
        stream = make(kind, data, num_replicas=ranks, rank=rank)
        stream.set_epoch(1)
        batches = loaded(stream, workers)
        counts.add(len(batches))
        seen.update(row for batch in batches for row in batch)
        if ranks == 1 and workers > 1:
            # 8 shards of 12 rows; worker w reads shards w, w + 2, ...
            assert READS[:workers].tolist() == [ROWS // workers] * workers
        else:
            assert READS[:max(workers, 1)].tolist() == [ROWS] * max(workers, 1), rank
    assert len(counts) == 1, "every rank as many batches"
    assert seen == Counter(range(ROWS)), "every row exactly once in the epoch"


@pytest.mark.parametrize("kind", ["packed", "grouped"])
def test_read_everything_mode_reads_every_row_in_every_reader(kind):
    data = source()
    seen = Counter()
    for rank in range(2):
        READS.zero_()
        stream = make(kind, data, num_replicas=2, rank=rank)  # no process group: read whole
        seen.update(row for batch in loaded(stream, 2) for row in batch)
        assert READS[:2].tolist() == [ROWS, ROWS]
    assert set(seen) == set(range(ROWS))
    READS.zero_()
    explicit = make(kind, data, read_shards=False)
    rows = Counter(r for b in loaded(explicit, 2) for r in b)
    # Dealt out to two workers: an uneven last round repeats one first batch.
    assert set(rows) == set(range(ROWS)) and sum(rows.values()) - ROWS <= BUDGET
    assert READS[:2].tolist() == [ROWS, ROWS]


def test_automatic_only_where_it_can_be_honoured():
    # One rank, two workers, eight shards: on.
    READS.zero_()
    assert Counter(r for b in loaded(make("packed", source()), 2) for r in b) == Counter(
        range(ROWS))
    assert READS[:2].tolist() == [ROWS // 2] * 2
    # Fewer shards than readers: every reader reads every row, dealt out as before.
    READS.zero_()
    few = Counter(r for b in loaded(make("packed", source(shards=1)), 2) for r in b)
    # Dealt out to two workers: an uneven last round repeats one first batch.
    assert set(few) == set(range(ROWS)) and sum(few.values()) - ROWS <= BUDGET
    assert READS[:2].tolist() == [ROWS, ROWS]
    # Shards one epoch, then the same rows in the next, both read by shard.
    stream = make("grouped", source())
    epochs = []
    for epoch in range(2):
        stream.set_epoch(epoch)
        epochs.append(loaded(stream, 2))
        assert sorted(r for b in epochs[-1] for r in b) == list(range(ROWS))
    assert epochs[0] != epochs[1]


def test_options_that_cannot_be_honoured_are_refused():
    rows = [{"input_ids": [1, 2], "row": i} for i in range(8)]
    with pytest.raises(ValueError, match="read_shards must be True.*not 'yes'"):
        fastcollate.PackedStream(rows, 8, read_shards="yes")
    with pytest.raises(ValueError, match=r"read_shards=True needs a whole datasets.*not a list"):
        fastcollate.PackedStream(rows, 8, read_shards=True)
    split = split_dataset_by_node(source(), rank=0, world_size=2)
    with pytest.raises(ValueError, match="split with split_dataset_by_node"):
        fastcollate.LengthGroupedStream(split, 2, read_shards=True)
    with pytest.raises(ValueError, match="source_sharded='rank' says it is split already"):
        fastcollate.PackedStream(source(), 8, read_shards=True, source_sharded="rank")
    with pytest.raises(ValueError, match="read_shards=True on 2 ranks would have each rank"):
        fastcollate.PackedStream(source(), 64, num_replicas=2, rank=0, read_shards=True)
    # Workers are known when iterating: two of them for one shard.
    one = fastcollate.PackedStream(source(shards=1), 64, read_shards=True)
    with pytest.raises(ValueError, match=r"1 shard\(s\) for 1 rank\(s\) x 2 DataLoader"):
        loaded(one, 2)


def test_ranks_with_a_process_group_read_everything(tmp_path):
    """With a process group and several ranks, each reader reads every row (ranks packing their
    own shards could only be evened out by repeating or dropping rows)."""
    torch.distributed.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}",
                                         rank=0, world_size=1)
    try:
        READS.zero_()
        auto = make("packed", source(), num_replicas=2, rank=1)
        rows = [r for b in loaded(auto, 0) for r in b]
        assert int(READS[0]) == ROWS and len(set(rows)) == len(rows) < ROWS
    finally:
        torch.distributed.destroy_process_group()


def uneven_source():
    """Four shards; rank 0's two (of two ranks) keep 26 rows, rank 1's 22."""
    table = {"input_ids": [[7] * (1 + (i * 13) % 40) for i in range(64)], "row": list(range(64))}
    data = datasets.Dataset.from_dict(table).to_iterable_dataset(num_shards=4)
    return data.filter(lambda row: row["row"] < 40 or row["row"] % 3 == 0)


def rank_loop(rank, store, out, kind):
    torch.distributed.init_process_group("gloo", init_method=f"file://{store}", rank=rank,
                                         world_size=2)
    stream = make(kind, uneven_source())  # automatic: a process group, num_workers=0
    batches = loaded(stream, 0)
    with open(os.path.join(out, f"{kind}{rank}.txt"), "w") as f:
        json.dump([batches, stream.state_dict()["batches"]], f)
    torch.distributed.destroy_process_group()


@pytest.mark.parametrize("kind", ["packed", "grouped"])
def test_ranks_in_step_every_row_once(tmp_path, kind):
    context = torch.multiprocessing.get_context("fork")
    processes = [context.Process(target=rank_loop,
                                 args=(rank, str(tmp_path / "store"), str(tmp_path), kind))
                 for rank in range(2)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(120)
        assert process.exitcode == 0
    results = [json.loads((tmp_path / f"{kind}{rank}.txt").read_text()) for rank in range(2)]
    (first, first_count), (second, second_count) = results
    assert len(first) == len(second) == first_count == second_count
    kept = [row for row in range(64) if row < 40 or row % 3 == 0]
    seen = Counter(row for batches in (first, second) for batch in batches for row in batch)
    assert seen == Counter(kept)


def test_an_over_long_row_is_named_by_its_index_in_the_stream():
    """Read by shard (one rank, two workers), row 77 of the stream is row 5 of the second
    worker's shards; the error names the stream's row."""
    table = {"input_ids": [[7] * (200 if i == 77 else 3) for i in range(ROWS)],
             "row": list(range(ROWS))}
    data = datasets.Dataset.from_dict(table).to_iterable_dataset(num_shards=SHARDS)
    stream = fastcollate.PackedStream(data, 64, buffer=16)
    with pytest.raises(ValueError, match=r"row 77 of the stream has 200 tokens"):
        loaded(stream, 2)
