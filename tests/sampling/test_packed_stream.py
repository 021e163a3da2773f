"""`PackedStream`: token-budget batches packed from a stream. Every batch within the budget,
every row in exactly one batch per epoch (one process, DataLoader workers, simulated ranks;
two real processes in test_multiprocess_packed_stream.py), reproducible per (seed, epoch),
lazy on an endless stream, and bad input named."""

from __future__ import annotations

import itertools
from collections import Counter

import datasets
import numpy as np
import pytest
import torch
from datasets.distributed import split_dataset_by_node
from hypothesis import example, given, settings
from hypothesis import strategies as st

import fastcollate
from tests.support.hypothesis_profiles import examples
from tests.support.streams import (
    local_stream,
    lognormal_lengths,
    make_rows,
    rounds_dealt_unchanged,
)


def check_epoch(batches, lengths, max_tokens):
    """Every batch within budget and not empty; every row exactly once."""
    for batch in batches:
        assert batch
        assert sum(len(row["input_ids"]) for row in batch) <= max_tokens
    assert sorted(row["row"] for batch in batches for row in batch) == list(range(len(lengths)))


@settings(max_examples=examples(60), deadline=None)
@given(
    lengths=st.lists(st.integers(0, 70), max_size=300),
    max_tokens=st.integers(70, 400),
    buffer=st.integers(1, 120),
    seed=st.integers(0, 2**32),
)
def test_every_row_once_within_budget(lengths, max_tokens, buffer, seed):
    stream = fastcollate.PackedStream(make_rows(lengths), max_tokens, buffer=buffer, seed=seed)
    check_epoch(list(stream), lengths, max_tokens)


@settings(max_examples=examples(40), deadline=None)
@given(
    lengths=st.lists(st.integers(1, 60), max_size=200),
    world=st.integers(1, 5),
    drop_last=st.booleans(),
    buffer=st.integers(1, 64),
)
# Three batches for two ranks: the last two rounds are the whole epoch, and its first batch is
# halved.
@example(lengths=[1] * 5, world=2, drop_last=False, buffer=2)
def test_ranks_split_the_batches(lengths, world, drop_last, buffer):
    rows = make_rows(lengths)
    alone = list(fastcollate.PackedStream(rows, 100, buffer=buffer, seed=5))
    per_rank = [list(fastcollate.PackedStream(rows, 100, buffer=buffer, seed=5,
                                              num_replicas=world, rank=rank,
                                              drop_last=drop_last))
                for rank in range(world)]
    # Every rank the same number of batches: all of them, dealt round robin, the last round
    # filled from the first batches or dropped.
    expected = len(alone) // world if drop_last else -(-len(alone) // world)
    assert [len(batches) for batches in per_rank] == [expected] * world
    kept = rounds_dealt_unchanged(len(alone), world, drop_last)
    for rank, batches in enumerate(per_rank):
        assert batches[:kept] == alone[rank::world][:kept]
    counts = Counter(row["row"] for batches in per_rank for batch in batches for row in batch)
    if drop_last:
        kept = {row["row"] for batch in alone[: expected * world] for row in batch}
        assert counts == Counter(kept)
    else:
        assert set(counts) == set(range(len(lengths)))
        repeated = {row["row"] for batch in alone[:world] for row in batch}
        assert all(count == 1 or row in repeated for row, count in counts.items())


def test_efficiency_on_imdb_like_lengths():
    # Not timing: how full the batches are is a property of the packing.
    lengths = lognormal_lengths(20_000)
    batches = list(fastcollate.PackedStream(make_rows(lengths), 8192, buffer=4096))
    check_epoch(batches, lengths, 8192)
    assert sum(lengths) / (len(batches) * 8192) > 0.99
    # Each buffer's least full batch waits for the next buffer: without that, every buffer
    # would end in a part-empty batch. A buffer of one row packs one row per batch.
    single = list(fastcollate.PackedStream(make_rows(lengths[:500]), 8192, buffer=1))
    assert len(single) == 500


def test_seed_and_epoch():
    rows = make_rows(lognormal_lengths(3000, seed=1))
    stream = fastcollate.PackedStream(rows, 2048, buffer=512, seed=7)

    def order(s):
        return [[row["row"] for row in batch] for batch in s]

    first = order(stream)
    assert order(stream) == first
    assert order(fastcollate.PackedStream(rows, 2048, buffer=512, seed=7)) == first
    stream.set_epoch(1)
    assert stream.epoch == 1
    second = order(stream)
    assert second != first
    assert sorted(itertools.chain(*second)) == sorted(itertools.chain(*first))
    stream.set_epoch(0)
    assert order(stream) == first
    assert order(fastcollate.PackedStream(rows, 2048, buffer=512, seed=8)) != first


def test_set_epoch_reaches_a_shuffled_datasets_stream():
    lengths = lognormal_lengths(400, seed=2, cap=100)
    dataset = datasets.Dataset.from_dict({"input_ids": [r["input_ids"] for r in make_rows(lengths)],
                                          "row": list(range(400))})
    source = dataset.to_iterable_dataset(num_shards=4).shuffle(seed=0, buffer_size=50)
    stream = fastcollate.PackedStream(source, 512, buffer=64)
    first = list(stream)
    check_epoch(first, lengths, 512)
    stream.set_epoch(3)
    assert source.epoch == 3
    again = list(stream)
    check_epoch(again, lengths, 512)
    assert [r["row"] for b in again for r in b] != [r["row"] for b in first for r in b]


def test_endless_stream_is_lazy():
    read = []

    def endless():
        for i in itertools.count():
            read.append(i)
            yield {"input_ids": [1] * (1 + i % 50)}

    stream = fastcollate.PackedStream(endless(), 256, buffer=100)
    batches = list(itertools.islice(iter(stream), 5))
    assert len(batches) == 5
    assert all(sum(len(r["input_ids"]) for r in b) <= 256 for b in batches)
    assert len(read) <= 200  # two buffers at most, not the whole stream


def row_numbers(batches):
    """Each batch as the tuple of its rows' numbers."""
    return [tuple(row["row"] for row in batch) for batch in batches]


@pytest.mark.multiprocess
@pytest.mark.parametrize("file_format", ["parquet", "json"])
def test_streams_loaded_from_local_files(tmp_path, file_format):
    lengths = lognormal_lengths(1000, seed=6, cap=400)
    source = local_stream(tmp_path, file_format, datasets.Dataset.from_list(make_rows(lengths)))
    parities = set()
    for max_tokens in (1024, 2048):
        stream = fastcollate.PackedStream(source, max_tokens, buffer=256, seed=2)
        first = list(stream)
        check_epoch(first, lengths, max_tokens)
        assert row_numbers(stream) == row_numbers(first)
        stream.set_epoch(1)
        second = list(stream)
        check_epoch(second, lengths, max_tokens)
        # Packed differently, not only in another order.
        assert Counter(row_numbers(second)) != Counter(row_numbers(first))
        epochs = {0: first, 1: second}
        parities.add(len(first) % 2)
        # Two persistent DataLoader workers (set_epoch reaches them through shared memory):
        # worker w keeps batches w, w + 2, ... of the epoch (the second one fewer when their
        # number is odd), and the loader takes them in turn: the epoch's batches, in order.
        loader = torch.utils.data.DataLoader(stream, batch_size=None, num_workers=2,
                                             persistent_workers=True,
                                             collate_fn=lambda batch: batch)
        for epoch in (0, 1, 0):
            stream.set_epoch(epoch)
            assert row_numbers(loader) == row_numbers(epochs[epoch])
    assert parities == {0, 1}  # an even and an odd number of batches


@pytest.mark.multiprocess
@pytest.mark.parametrize("source", ["datasets", "torch"])
def test_dataloader_workers_take_disjoint_batches(source):
    lengths = lognormal_lengths(600, seed=3, cap=120)
    rows = make_rows(lengths)
    if source == "datasets":
        # Read inside a worker, a datasets stream hands out only that worker's shards; the
        # PackedStream reads it whole in every worker and keeps that worker's batches.
        data = datasets.Dataset.from_list(rows).to_iterable_dataset(num_shards=3)
    else:
        class Rows(torch.utils.data.IterableDataset):
            def __iter__(self):
                return iter(rows)
        data = Rows()
    # A torch IterableDataset does not say whether it splits itself by worker: said here.
    sharded = {"source_sharded": False} if source == "torch" else {}
    stream = fastcollate.PackedStream(data, 400, buffer=128, seed=1, **sharded)
    alone = list(stream)
    loader = torch.utils.data.DataLoader(stream, batch_size=None, num_workers=2,
                                         collate_fn=lambda batch: batch)
    batches = list(loader)
    check_epoch(alone, lengths, 400)
    counts = Counter(row["row"] for batch in batches for row in batch)
    assert counts == Counter(range(len(lengths)))  # every row once
    assert all(sum(len(r["input_ids"]) for r in b) <= 400 for b in batches)


def test_collated_by_the_flattening_collator():
    rows = [{"input_ids": list(range(1, 1 + n))} for n in (30, 50, 20, 90, 10)]
    loader = torch.utils.data.DataLoader(fastcollate.PackedStream(rows, 100, buffer=8),
                                         batch_size=None,
                                         collate_fn=fastcollate.DataCollatorWithFlattening())
    widths = [batch["input_ids"].shape[1] for batch in loader]
    assert sum(widths) == 200 and max(widths) <= 100


def test_over_long_rows():
    rows = make_rows([5, 30, 8])
    with pytest.raises(ValueError, match=r"row 1 of the stream has 30 tokens in 'input_ids', "
                                         r"more than max_tokens=10"):
        list(fastcollate.PackedStream(rows, 10))
    before = [dict(r, input_ids=list(r["input_ids"])) for r in rows]
    rows[1]["labels"] = list(rows[1]["input_ids"])
    rows[1]["tag"] = "x" * 30
    batches = list(fastcollate.PackedStream(rows, 10, truncate=True))
    cut = next(row for batch in batches for row in batch if row["row"] == 1)
    assert [row for batch in batches for row in batch if row["row"] == 1] == [cut]
    assert next(batch for batch in batches if cut in batch) == [cut]  # alone in its batch
    assert cut["input_ids"] == before[1]["input_ids"][:10]
    assert cut["labels"] == before[1]["input_ids"][:10]
    assert cut["tag"] == "x" * 30  # a string is not a token column
    assert rows[1]["input_ids"] == before[1]["input_ids"]  # the caller's row is untouched


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"max_tokens": 0}, ValueError, "max_tokens must be at least 1, not 0"),
        ({"max_tokens": True}, TypeError, "max_tokens must be an integer, not a bool"),
        ({"buffer": 0}, ValueError, "buffer must be at least 1, not 0"),
        ({"buffer": 2.5}, TypeError, "buffer must be an integer, not float"),
        ({"seed": -1}, ValueError, "seed must be at least 0"),
        ({"num_replicas": 2, "rank": 2}, ValueError, r"rank 2 is outside \[0, 2\)"),
        ({"column": 3}, TypeError, "column must be a str"),
    ],
)
def test_bad_options(kwargs, error, message):
    options = {"max_tokens": 16, **kwargs}
    with pytest.raises(error, match=message):
        fastcollate.PackedStream(make_rows([3]), **options)


@pytest.mark.parametrize(
    ("rows", "error", "message"),
    [
        ([{"input_ids": [1]}, {"ids": [1, 2]}], ValueError,
         r"row 1 of the stream has no 'input_ids' column \(it has \['ids'\]\)"),
        ([{"input_ids": 5}], TypeError, "row 0: 'input_ids' must be a list, tuple, 1-d array "
                                        "or tensor of token ids, not int"),
        ([{"input_ids": [1]}, {"input_ids": "abc"}], TypeError, "row 1: 'input_ids' .* not str"),
        ([{"input_ids": np.ones((2, 2))}], TypeError, "row 0: 'input_ids' .* not ndarray"),
        ([[1, 2, 3]], TypeError, "row 0 of the stream is a list, not a mapping of columns"),
    ],
)
def test_bad_rows(rows, error, message):
    with pytest.raises(error, match=message):
        list(fastcollate.PackedStream(rows, 16))


def test_bad_sources():
    with pytest.raises(TypeError, match="iterable must be an iterable of rows, not int"):
        fastcollate.PackedStream(5, 16)
    source = datasets.Dataset.from_list(make_rows([3, 4])).to_iterable_dataset(num_shards=2)
    split = split_dataset_by_node(source, rank=0, world_size=2)
    # Split by node: this rank's rows, never dealt out to the ranks again.
    assert fastcollate.PackedStream(split, 16, num_replicas=2, rank=0).source_sharded is None
    assert sorted(r["row"] for b in fastcollate.PackedStream(split, 16, num_replicas=2, rank=0)
                  for r in b) == [0]


def test_numpy_and_tensor_rows():
    rows = [{"input_ids": np.arange(7)}, {"input_ids": torch.arange(9)}, {"input_ids": (1, 2)}]
    batches = list(fastcollate.PackedStream(rows, 10, buffer=2))
    assert sorted(len(r["input_ids"]) for b in batches for r in b) == [2, 7, 9]
    assert all(sum(len(r["input_ids"]) for r in b) <= 10 for b in batches)


@pytest.mark.parametrize("stream_class", [fastcollate.PackedStream,
                                          fastcollate.LengthGroupedStream])
def test_accelerate_cutting_the_stream_again_is_refused(stream_class):
    # What accelerator.prepare wraps a stream in on two processes with dispatch_batches=False;
    # tests/sampling/test_multiprocess_packed_stream.py prepares it for real under torchrun.
    from accelerate.data_loader import IterableDatasetShard

    rows = make_rows([5, 9, 30, 12, 7])
    name = stream_class.__name__
    cut = IterableDatasetShard(stream_class(rows, 64, num_replicas=2, rank=0), batch_size=1,
                               num_processes=2, process_index=0)
    with pytest.raises(ValueError, match=f"{name} was prepared by accelerate on 2 processes: "
                                         "accelerate would cut each process's batches"):
        cut.set_epoch(1)
    with pytest.raises(ValueError, match=f"{name} was prepared by accelerate on 2 processes"):
        list(cut)
    # A stream read by one reader is accelerate's to deal out; one process keeps every batch.
    IterableDatasetShard(stream_class(rows, 64), batch_size=1, num_processes=2).set_epoch(1)
    alone = IterableDatasetShard(stream_class(rows, 64, num_replicas=2, rank=0), batch_size=1)
    alone.set_epoch(1)
    expected = stream_class(rows, 64, num_replicas=2, rank=0)
    expected.set_epoch(1)
    assert list(alone) == list(expected)
