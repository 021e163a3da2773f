"""PackedBatchSampler's properties: no batch over the token budget, every index exactly once
per epoch across ranks, equal batch counts per rank, the same batches for the same seed and
epoch and others for another, the token-efficiency figure, clear errors; and its DataLoader
use with DataCollatorWithFlattening over Arrow rows."""

from __future__ import annotations

import datasets
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import fastcollate
from fastcollate import PackedBatchSampler
from tests.support.hypothesis_profiles import examples

SETTINGS = settings(max_examples=examples(80), deadline=None)


@st.composite
def workloads(draw):
    max_tokens = draw(st.integers(1, 600))
    lengths = draw(st.lists(st.integers(0, max_tokens), max_size=400))
    return lengths, max_tokens


def rank_batches(lengths, max_tokens, replicas, **kwargs):
    return [
        list(PackedBatchSampler(lengths, max_tokens, num_replicas=replicas, rank=r, **kwargs))
        for r in range(replicas)
    ]


@SETTINGS
@given(
    workload=workloads(),
    replicas=st.integers(1, 5),
    seed=st.integers(0, 2**32),
    epoch=st.integers(0, 100),
    shuffle=st.booleans(),
    window_size=st.integers(1, 300),
)
def test_budget_coverage_and_equal_ranks(workload, replicas, seed, epoch, shuffle, window_size):
    lengths, max_tokens = workload
    options = dict(seed=seed, shuffle=shuffle, window_size=window_size)
    samplers = [
        PackedBatchSampler(lengths, max_tokens, num_replicas=replicas, rank=r, **options)
        for r in range(replicas)
    ]
    single = PackedBatchSampler(lengths, max_tokens, **options)
    for s in (*samplers, single):
        s.set_epoch(epoch)
    per_rank = [list(s) for s in samplers]
    everything = list(single)
    assert len({len(batches) for batches in per_rank}) == 1
    assert all(len(s) == len(per_rank[0]) for s in samplers)
    assert len(per_rank[0]) == -(-len(everything) // replicas)
    for batch in everything:
        assert batch
        assert sum(lengths[i] for i in batch) <= max_tokens
        assert all(type(i) is int for i in batch)
    assert sorted(i for batch in everything for i in batch) == list(range(len(lengths)))
    # Batch b of the epoch goes to rank b % replicas; the last round is filled by repeating
    # the epoch's first batches (cyclically, when there are fewer batches than ranks).
    in_order = [per_rank[b % replicas][b // replicas] for b in range(replicas * len(per_rank[0]))]
    assert in_order[: len(everything)] == everything
    assert in_order[len(everything) :] == (everything * replicas)[: len(in_order) - len(everything)]


@SETTINGS
@given(workload=workloads(), replicas=st.integers(1, 4), seed=st.integers(0, 1000))
def test_drop_last_drops_the_uneven_round(workload, replicas, seed):
    lengths, max_tokens = workload
    kept = rank_batches(lengths, max_tokens, replicas, seed=seed)
    dropped = rank_batches(lengths, max_tokens, replicas, seed=seed, drop_last=True)
    everything = rank_batches(lengths, max_tokens, 1, seed=seed)[0]
    assert len({len(b) for b in dropped}) == 1
    assert len(dropped[0]) == len(everything) // replicas
    for r in range(replicas):
        assert dropped[r] == kept[r][: len(dropped[r])]
    seen = [i for batches in dropped for batch in batches for i in batch]
    assert len(seen) == len(set(seen))


def test_deterministic_per_seed_and_epoch():
    lengths = np.random.default_rng(0).integers(1, 300, size=5000)
    a = PackedBatchSampler(lengths, 2048, seed=3)
    b = PackedBatchSampler(lengths.tolist(), 2048, seed=3)
    first = list(a)
    assert first == list(b) == list(a)
    a.set_epoch(1)
    second = list(a)
    assert second != first
    assert sorted(map(sorted, second)) != sorted(map(sorted, first))  # other groupings too
    a.set_epoch(0)
    assert list(a) == first
    assert list(PackedBatchSampler(lengths, 2048, seed=4)) != first
    ordered = PackedBatchSampler(lengths, 2048, shuffle=False, seed=9)
    ordered.set_epoch(5)
    assert list(ordered) == list(PackedBatchSampler(lengths, 2048, shuffle=False))


def test_batches_are_random_across_the_epoch():
    # Not one long-to-short sweep: the longest batches are spread over the epoch.
    lengths = np.random.default_rng(1).integers(1, 1000, size=20_000)
    batches = list(PackedBatchSampler(lengths, 4096, seed=0))
    longest = [max(lengths[i] for i in batch) for batch in batches]
    half = len(longest) // 2
    assert abs(np.mean(longest[:half]) - np.mean(longest[half:])) < 50


def imdb_like(n, seed=0):
    rng = np.random.default_rng(seed)
    return np.clip(rng.lognormal(np.log(230), 0.5, size=n).astype(np.int64), 4, 512)


def test_token_efficiency_on_imdb_like_lengths():
    lengths = imdb_like(200_000)
    sampler = PackedBatchSampler(lengths, 8192, seed=0)
    batches = list(sampler)
    tokens = sum(int(lengths[i]) for batch in batches for i in batch)
    assert tokens == int(lengths.sum())
    assert sampler.token_efficiency() == tokens / (len(batches) * 8192)
    assert sampler.token_efficiency() >= 0.998


def test_over_long_sequences():
    with pytest.raises(ValueError, match=r"sequence 2 has 130 tokens, more than max_tokens=128"):
        PackedBatchSampler([5, 7, 130, 200], 128)
    sampler = PackedBatchSampler([5, 7, 130, 200], 128, truncate=True, shuffle=False)
    batches = list(sampler)
    assert sorted(map(sorted, batches)) == [[0, 1], [2], [3]]
    with pytest.raises(ValueError, match=r"lengths\[1\] is -1"):
        PackedBatchSampler([5, -1], 128)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (dict(max_tokens=0), ValueError, "max_tokens"),
        (dict(max_tokens=8, num_replicas=2, rank=2), ValueError, "rank 2"),
        (dict(max_tokens=8, rank=-1), ValueError, "rank"),
        (dict(max_tokens=8, seed=-1), ValueError, "seed"),
        (dict(max_tokens=8, window_size=0), ValueError, "window_size"),
        (dict(max_tokens=8.5), TypeError, "max_tokens"),
    ],
)
def test_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        PackedBatchSampler([1, 2, 3], **kwargs)


def test_empty_lengths():
    assert list(PackedBatchSampler([], 8, num_replicas=2, rank=1)) == []


def test_dataloader_flattens_packed_arrow_batches():
    rng = np.random.default_rng(2)
    rows = [rng.integers(5, 100, size=int(n)).tolist() for n in rng.integers(1, 60, size=300)]
    dataset = datasets.Dataset.from_dict({"input_ids": rows})
    lengths = fastcollate.sequence_lengths(dataset)
    assert lengths.tolist() == [len(r) for r in rows]
    sampler = PackedBatchSampler(lengths, 256, seed=1)
    loader = torch.utils.data.DataLoader(
        fastcollate.ArrowBatches(dataset),
        batch_sampler=sampler,
        collate_fn=fastcollate.DataCollatorWithFlattening(return_flash_attn_kwargs=True),
    )
    seen = 0
    for batch, indices in zip(loader, sampler, strict=True):
        assert batch["input_ids"].shape == (1, sum(len(rows[i]) for i in indices))
        assert batch["input_ids"].shape[1] <= 256
        assert batch["input_ids"][0].tolist() == [t for i in indices for t in rows[i]]
        assert batch["cu_seq_lens_q"].tolist()[-1] == batch["input_ids"].shape[1]
        seen += len(indices)
    assert seen == len(rows)
