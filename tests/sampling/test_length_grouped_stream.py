"""`LengthGroupedStream`: batches of similar length grouped from a stream one buffer at a time.
Every row in exactly one batch per epoch (one process, DataLoader workers, simulated ranks,
streams loaded from local Parquet and JSON files; two real processes in
test_multiprocess_packed_stream.py), whole batches except the stream's last, batches far more
even in length than the stream's order, reproducible per (seed, epoch), lazy on an endless
stream, and bad input named."""

from __future__ import annotations

import copy
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


def rows_in(batches):
    return [row["row"] for batch in batches for row in batch]


def check_epoch(batches, n, batch_size, drop_last=False):
    """Whole batches but perhaps the last; every row exactly once (all but fewer than one
    batch's worth with drop_last)."""
    sizes = [len(batch) for batch in batches]
    assert all(size == batch_size for size in sizes[:-1])
    assert sizes == [] or 0 < sizes[-1] <= batch_size
    seen = rows_in(batches)
    assert len(seen) == len(set(seen))
    if drop_last:
        assert all(size == batch_size for size in sizes)
        assert len(seen) == n - n % batch_size
    else:
        assert sorted(seen) == list(range(n))


def padding(batches):
    """Pad tokens a padding collator adds to `batches` (each padded to its longest row)."""
    return sum(len(b) * max(len(r["input_ids"]) for r in b) - sum(len(r["input_ids"]) for r in b)
               for b in batches)


@settings(max_examples=examples(60), deadline=None)
@given(
    lengths=st.lists(st.integers(0, 70), max_size=300),
    batch_size=st.integers(1, 12),
    extra=st.integers(0, 100),
    seed=st.integers(0, 2**32),
    drop_last=st.booleans(),
)
def test_every_row_once_in_whole_batches(lengths, batch_size, extra, seed, drop_last):
    rows = make_rows(lengths)
    before = copy.deepcopy(rows)
    stream = fastcollate.LengthGroupedStream(rows, batch_size, buffer=batch_size + extra,
                                             seed=seed, drop_last=drop_last)
    check_epoch(list(stream), len(lengths), batch_size, drop_last)
    assert rows == before


@settings(max_examples=examples(40), deadline=None)
@given(
    lengths=st.lists(st.integers(1, 60), max_size=200),
    world=st.integers(1, 5),
    drop_last=st.booleans(),
    buffer=st.integers(4, 64),
)
# Two rounds only, both cut again: the first batch of the epoch is halved.
@example(lengths=[1] * 9, world=2, drop_last=False, buffer=4)
def test_ranks_split_the_batches(lengths, world, drop_last, buffer):
    rows = make_rows(lengths)
    alone = list(fastcollate.LengthGroupedStream(rows, 4, buffer=buffer, seed=5,
                                                 drop_last=drop_last))
    per_rank = [list(fastcollate.LengthGroupedStream(rows, 4, buffer=buffer, seed=5,
                                                     num_replicas=world, rank=rank,
                                                     drop_last=drop_last))
                for rank in range(world)]
    expected = len(alone) // world if drop_last else -(-len(alone) // world)
    assert [len(batches) for batches in per_rank] == [expected] * world
    kept = rounds_dealt_unchanged(len(alone), world, drop_last)
    for rank, batches in enumerate(per_rank):
        assert batches[:kept] == alone[rank::world][:kept]
    counts = Counter(rows_in(itertools.chain(*per_rank)))
    if drop_last:
        assert counts == Counter(rows_in(alone[: expected * world]))
    else:
        assert set(counts) == set(range(len(lengths)))
        repeated = set(rows_in(alone[:world]))
        assert all(count == 1 or row in repeated for row, count in counts.items())


def test_batches_are_grouped_by_length():
    lengths = lognormal_lengths(20_000, seed=4)
    rows = make_rows(lengths)
    grouped = list(fastcollate.LengthGroupedStream(rows, 16, buffer=4096, seed=1))
    check_epoch(grouped, len(rows), 16)
    in_order = [rows[i: i + 16] for i in range(0, len(rows), 16)]
    # Within-batch spread of lengths, and the padding a padding collator would add.
    spread = np.mean([np.ptp([len(r["input_ids"]) for r in b]) for b in grouped])
    spread_in_order = np.mean([np.ptp([len(r["input_ids"]) for r in b]) for b in in_order])
    assert spread < spread_in_order / 20
    assert padding(grouped) < padding(in_order) / 20
    # The batches are not handed out longest first: their order is shuffled.
    longest = [max(len(r["input_ids"]) for r in b) for b in grouped[:256]]
    assert longest != sorted(longest, reverse=True)


def test_seed_and_epoch():
    rows = make_rows(lognormal_lengths(3000, seed=1))
    stream = fastcollate.LengthGroupedStream(rows, 8, buffer=512, seed=7)

    def order(s):
        return [[row["row"] for row in batch] for batch in s]

    first = order(stream)
    assert order(stream) == first
    assert order(fastcollate.LengthGroupedStream(rows, 8, buffer=512, seed=7)) == first
    stream.set_epoch(1)
    assert stream.epoch == 1
    second = order(stream)
    assert second != first
    assert sorted(itertools.chain(*second)) == sorted(itertools.chain(*first))
    stream.set_epoch(0)
    assert order(stream) == first
    assert order(fastcollate.LengthGroupedStream(rows, 8, buffer=512, seed=8)) != first


def test_set_epoch_reaches_a_shuffled_datasets_stream():
    lengths = lognormal_lengths(400, seed=2, cap=100)
    dataset = datasets.Dataset.from_list(make_rows(lengths))
    source = dataset.to_iterable_dataset(num_shards=4).shuffle(seed=0, buffer_size=50)
    stream = fastcollate.LengthGroupedStream(source, 8, buffer=64)
    first = list(stream)
    check_epoch(first, 400, 8)
    stream.set_epoch(3)
    assert source.epoch == 3
    again = list(stream)
    check_epoch(again, 400, 8)
    assert rows_in(again) != rows_in(first)


@pytest.mark.multiprocess
@pytest.mark.parametrize("file_format", ["parquet", "json"])
def test_streams_loaded_from_local_files(tmp_path, file_format):
    lengths = lognormal_lengths(1000, seed=5, cap=300)
    dataset = datasets.Dataset.from_list(make_rows(lengths))
    source = local_stream(tmp_path, file_format, dataset)
    stream = fastcollate.LengthGroupedStream(source, 8, buffer=256, seed=2)
    batches = list(stream)
    check_epoch(batches, 1000, 8)
    in_order = [dataset[i: i + 8] for i in range(0, 1000, 8)]
    in_order = [[{"input_ids": ids} for ids in b["input_ids"]] for b in in_order]
    assert padding(batches) < padding(in_order) / 5
    # Two DataLoader workers: each reads the whole stream and keeps its own batches.
    loader = torch.utils.data.DataLoader(stream, batch_size=None, num_workers=2,
                                         collate_fn=lambda batch: batch)
    loaded = list(loader)
    # The workers of one rank need not yield as many: the loader yields the epoch's batches.
    assert loaded == batches
    assert Counter(rows_in(loaded)) == Counter(range(1000))


def test_endless_stream_is_lazy():
    read = []

    def endless():
        for i in itertools.count():
            read.append(i)
            yield {"input_ids": [1] * (1 + i * 7919 % 50)}

    stream = fastcollate.LengthGroupedStream(endless(), 4, buffer=100)
    batches = list(itertools.islice(iter(stream), 30))
    assert [len(b) for b in batches] == [4] * 30
    assert len(read) <= 200  # two buffers at most, not the whole stream


def test_collated_by_a_padding_collator(bert_tokenizer):
    rows = [{"input_ids": list(range(1, 1 + n))} for n in (30, 5, 31, 6, 12, 4)]
    collator = fastcollate.DataCollatorWithPadding(bert_tokenizer)
    loader = torch.utils.data.DataLoader(fastcollate.LengthGroupedStream(rows, 2, buffer=6),
                                         batch_size=None, collate_fn=collator)
    widths = sorted(batch["input_ids"].shape[1] for batch in loader)
    assert widths == [5, 12, 31]  # (31, 30), (12, 6), (5, 4)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"batch_size": 0}, ValueError, "batch_size must be at least 1, not 0"),
        ({"batch_size": True}, TypeError, "batch_size must be an integer, not a bool"),
        ({"buffer": 0}, ValueError, "buffer must be at least 1, not 0"),
        ({"buffer": 3}, ValueError, "buffer=3 rows cannot hold one batch of batch_size=4"),
        ({"seed": -1}, ValueError, "seed must be at least 0"),
        ({"num_replicas": 2, "rank": 2}, ValueError, r"rank 2 is outside \[0, 2\)"),
        ({"column": 3}, TypeError, "column must be a str"),
    ],
)
def test_bad_options(kwargs, error, message):
    options = {"batch_size": 4, **kwargs}
    with pytest.raises(error, match=message):
        fastcollate.LengthGroupedStream(make_rows([3]), **options)


@pytest.mark.parametrize(
    ("rows", "error", "message"),
    [
        ([{"input_ids": [1]}, {"ids": [1, 2]}], ValueError,
         r"row 1 of the stream has no 'input_ids' column \(it has \['ids'\]\)"),
        ([{"input_ids": 5}], TypeError, "row 0: 'input_ids' must be a list, tuple, 1-d array "
                                        "or tensor of token ids, not int"),
        ([[1, 2, 3]], TypeError, "row 0 of the stream is a list, not a mapping of columns"),
    ],
)
def test_bad_rows(rows, error, message):
    with pytest.raises(error, match=message):
        list(fastcollate.LengthGroupedStream(rows, 1))


def test_bad_sources():
    with pytest.raises(TypeError, match="LengthGroupedStream: iterable must be an iterable"):
        fastcollate.LengthGroupedStream(5, 16)
    source = datasets.Dataset.from_list(make_rows([3, 4])).to_iterable_dataset(num_shards=2)
    split = split_dataset_by_node(source, rank=0, world_size=2)
    # Split by node: this rank's rows, never dealt out to the ranks again.
    assert [[r["row"] for r in b] for b in fastcollate.LengthGroupedStream(
        split, 16, num_replicas=2, rank=0)] == [[0]]
