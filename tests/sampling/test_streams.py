"""Streams (a `datasets.IterableDataset`, a torch `IterableDataset`, a generator) given to
anything that needs every row's length: a ValueError at once, naming the argument. The streams
here are infinite, so a test that returns proves that nothing was read from them."""

from __future__ import annotations

import itertools

import datasets
import numpy as np
import pytest
import torch

import fastcollate
from fastcollate.sampling.rebalance import BatchRebalanceSampler
from fastcollate.sampling.samplers import DistributedLengthGroupedSampler, LengthGroupedSampler


def endless_rows():
    for i in itertools.count():
        yield {"input_ids": [1] * (1 + i % 7)}


class EndlessTorchStream(torch.utils.data.IterableDataset):
    def __iter__(self):
        return endless_rows()


class SizedTorchStream(EndlessTorchStream):
    """A torch IterableDataset may define __len__; it still has no random access."""

    def __len__(self):
        return 10


def endless_lengths():
    return (1 + i % 7 for i in itertools.count())


STREAMS = {
    "datasets.IterableDataset": lambda: datasets.IterableDataset.from_generator(endless_rows),
    "torch IterableDataset": EndlessTorchStream,
    "sized torch IterableDataset": SizedTorchStream,
    "generator": endless_rows,
    "iterator": lambda: iter(endless_rows()),
}


@pytest.fixture(params=sorted(STREAMS))
def stream(request):
    return STREAMS[request.param]()


def test_sequence_lengths(stream):
    with pytest.raises(ValueError, match=r"sequence_lengths: dataset is .* front to back"):
        fastcollate.sequence_lengths(stream)
    with pytest.raises(ValueError, match="dataset is"):
        fastcollate.sequence_lengths(stream, length_column_name="length")


def test_length_grouped_sampler(stream):
    with pytest.raises(ValueError, match="LengthGroupedSampler: dataset is"):
        LengthGroupedSampler(4, dataset=stream)
    # Lengths do not help: a stream cannot be read at the indices the sampler yields.
    with pytest.raises(ValueError, match="LengthGroupedSampler: dataset is"):
        LengthGroupedSampler(4, dataset=stream, lengths=[1, 2, 3])


def test_distributed_length_grouped_sampler(stream):
    with pytest.raises(ValueError, match="DistributedLengthGroupedSampler: dataset is"):
        DistributedLengthGroupedSampler(4, dataset=stream, num_replicas=2, rank=0)
    # Raised before the world size is looked up (no process group here).
    with pytest.raises(ValueError, match="DistributedLengthGroupedSampler: dataset is"):
        DistributedLengthGroupedSampler(4, dataset=stream)


def test_batch_samplers(stream):
    with pytest.raises(ValueError, match="PackedBatchSampler: lengths is"):
        fastcollate.PackedBatchSampler(stream, 64)
    with pytest.raises(ValueError, match="BatchRebalanceSampler: lengths is"):
        BatchRebalanceSampler(stream, 8, 1, 1)


@pytest.mark.parametrize(
    "call",
    [
        lambda lengths: fastcollate.get_length_grouped_indices(lengths, 4),
        lambda lengths: LengthGroupedSampler(4, lengths=lengths),
        lambda lengths: fastcollate.PackedBatchSampler(lengths, 64),
        lambda lengths: BatchRebalanceSampler(lengths, 8, 1, 1),
    ],
    ids=["get_length_grouped_indices", "LengthGroupedSampler", "Packed", "Rebalance"],
)
def test_lengths_from_a_generator(call):
    with pytest.raises(ValueError, match="lengths is a generator.*list, numpy array or tensor"):
        call(endless_lengths())


def test_lengths_column_of_a_stream():
    stream = datasets.IterableDataset.from_generator(endless_rows).map(
        lambda row: {"length": len(row["input_ids"])}
    )
    with pytest.raises(ValueError, match="PackedBatchSampler: lengths is"):
        fastcollate.PackedBatchSampler(stream["length"], 64)


def test_message_says_what_to_do():
    with pytest.raises(ValueError) as caught:
        fastcollate.sequence_lengths(datasets.IterableDataset.from_generator(endless_rows))
    assert str(caught.value) == (
        "sequence_lengths: dataset is a datasets.IterableDataset, which can only be read front "
        "to back; length-aware sampling needs every row's length up front and random access to "
        "the rows — use a map-style dataset (a datasets.Dataset: load_dataset without "
        "streaming=True, or Dataset.from_generator), or pass lengths="
    )


def test_sized_inputs_still_work():
    rows = [{"input_ids": [1] * n} for n in (3, 1, 2)]
    assert fastcollate.sequence_lengths(rows).tolist() == [3, 1, 2]
    assert len(LengthGroupedSampler(2, lengths=np.array([3, 1, 2]))) == 3
    assert len(LengthGroupedSampler(2, lengths=range(3))) == 3
    assert len(fastcollate.PackedBatchSampler(torch.tensor([3, 1, 2]), 8)) == 1
