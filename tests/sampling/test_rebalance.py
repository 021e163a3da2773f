"""BatchRebalanceSampler against transformers' own: the same micro-batches for the same
lengths, batch geometry, seed, epoch and drop_last, on every rank; and fastcollate.Trainer /
patch_transformers() with train_sampling_strategy="batch_rebalance"."""

from __future__ import annotations

import datasets
import numpy as np
import pytest
import torch
import transformers
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import trainer_pt_utils as hf

import fastcollate
from fastcollate import BatchRebalanceSampler
from tests.support.hypothesis_profiles import examples
from tests.support.trainer_runs import sentence, training_args

pytestmark = pytest.mark.parity

SETTINGS = settings(max_examples=examples(150), deadline=None)

# Few distinct values (ties decide the stable sort), or spread out (the cost model's balance).
lengths_lists = st.one_of(
    st.lists(st.integers(0, 4), max_size=120),
    st.lists(st.integers(1, 5000), max_size=120),
)


@st.composite
def geometries(draw):
    dp_size = draw(st.integers(1, 4))
    grad_accum = draw(st.integers(1, 6))  # up to 24 groups: set walk orders that are not sorted
    groups = dp_size * grad_accum
    effective_batch_size = draw(st.integers(groups, groups * 5 + 3))
    return effective_batch_size, dp_size, grad_accum


def every_rank(cls, lengths, geometry, **kwargs):
    effective_batch_size, dp_size, grad_accum = geometry
    return [
        cls(lengths, effective_batch_size, dp_size, grad_accum, rank=rank, **kwargs)
        for rank in range(dp_size)
    ]


@SETTINGS
@given(
    lengths=lengths_lists,
    geometry=geometries(),
    seed=st.integers(0, 2**31),
    epochs=st.lists(st.integers(0, 50), min_size=1, max_size=3),
    drop_last=st.booleans(),
    shuffle=st.booleans(),
    kind=st.sampled_from(["list", "int64", "int32", "tensor"]),
)
def test_micro_batches_match_transformers(
    lengths, geometry, seed, epochs, drop_last, shuffle, kind
):
    given_lengths = {
        "list": lengths,
        "int64": np.array(lengths, dtype=np.int64),
        "int32": np.array(lengths, dtype=np.int32),
        "tensor": torch.tensor(lengths, dtype=torch.int64),
    }[kind]
    options = dict(seed=seed, drop_last=drop_last, shuffle=shuffle)
    ours = every_rank(BatchRebalanceSampler, given_lengths, geometry, **options)
    theirs = every_rank(hf.BatchRebalanceSampler, lengths, geometry, **options)
    for epoch in epochs:
        for a, b in zip(ours, theirs, strict=True):
            a.set_epoch(epoch)
            b.set_epoch(epoch)
            expected = list(b)
            got = list(a)
            assert got == expected
            assert len(a) == len(b) == len(got)
            assert all(type(i) is int for batch in got for i in batch)
        for name in ("num_full_batches", "remainder", "has_tail", "num_global_batches"):
            assert getattr(ours[0], name) == getattr(theirs[0], name), name


@settings(max_examples=examples(25), deadline=None)
@given(
    size=st.integers(0, 70),
    geometry=geometries(),
    seed=st.integers(0, 1000),
)
def test_padded_tail_matches_transformers(size, geometry, seed):
    # Tails smaller than the number of groups, which are filled from the start of the order.
    effective_batch_size, dp_size, grad_accum = geometry
    groups = dp_size * grad_accum
    size = size - size % effective_batch_size + (seed % groups)
    lengths = [(7 * i + seed) % 31 for i in range(size)]
    ours = every_rank(BatchRebalanceSampler, lengths, geometry, seed=seed, drop_last=False)
    theirs = every_rank(hf.BatchRebalanceSampler, lengths, geometry, seed=seed, drop_last=False)
    for a, b in zip(ours, theirs, strict=True):
        assert list(a) == list(b)


def test_every_rank_at_once_is_the_ranks_interleaved():
    lengths = np.random.default_rng(1).integers(1, 900, size=1000)
    ranks = every_rank(BatchRebalanceSampler, lengths, (48, 3, 4))
    every = ranks[0].micro_batches(rank=-1)
    per_rank = [list(sampler) for sampler in ranks]
    steps = len(per_rank[0]) // 4
    def step_batches(step):
        return [batch for r in range(3) for batch in per_rank[r][4 * step : 4 * step + 4]]

    assert every == [batch for step in range(steps) for batch in step_batches(step)]
    # Each step uses its 48 samples exactly once across ranks.
    for step in range(steps):
        used = [i for batch in step_batches(step) for i in batch]
        assert len(used) == len(set(used)) == 48


def test_large_epoch_matches_transformers():
    rng = np.random.default_rng(3)
    lengths = np.minimum(rng.lognormal(np.log(300), 1.0, size=20_000).astype(np.int64), 4096)
    for rank in (0, 1):
        ours = BatchRebalanceSampler(lengths, 256, 2, 4, rank=rank, seed=5)
        theirs = hf.BatchRebalanceSampler(lengths.tolist(), 256, 2, 4, rank=rank, seed=5)
        assert list(ours) == list(theirs)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (dict(effective_batch_size=3, dp_size=2, grad_accum=2), ValueError, "at least dp_size"),
        (dict(effective_batch_size=8, dp_size=0, grad_accum=2), ValueError, "dp_size"),
        (dict(effective_batch_size=8, dp_size=2, grad_accum=0), ValueError, "grad_accum"),
        (dict(effective_batch_size=8, dp_size=2, grad_accum=2, rank=2), ValueError, "rank 2"),
        (dict(effective_batch_size=8.0, dp_size=2, grad_accum=2), TypeError, "float"),
        (dict(effective_batch_size=8, dp_size=True, grad_accum=2), TypeError, "bool"),
    ],
)
def test_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        BatchRebalanceSampler([1] * 20, **kwargs)


def test_bad_lengths_name_the_row():
    with pytest.raises(ValueError, match=r"lengths\[2\] is -3"):
        BatchRebalanceSampler([1, 2, -3, 4], 4, 2, 2)
    with pytest.raises(TypeError, match=r"lengths\[1\]"):
        BatchRebalanceSampler([1, "2", 3, 4], 4, 2, 2)


# --- Trainer ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def train_split(bert_tokenizer):
    texts = [sentence(i) for i in range(30)]
    ds = datasets.Dataset.from_dict({"text": texts, "label": [i % 2 for i in range(30)]})
    return ds.map(lambda b: bert_tokenizer(b["text"]), batched=True).shuffle(seed=1)


def rebalance_run(trainer_cls, model_path, tokenizer, train, tmp_path):
    torch.manual_seed(0)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        model_path, num_labels=2
    )
    args = training_args(
        tmp_path,
        "batch_rebalance",
        gradient_accumulation_steps=2,
        max_steps=-1,
        num_train_epochs=2,
        dataloader_drop_last=False,
    )
    trainer = trainer_cls(model=model, args=args, train_dataset=train, processing_class=tokenizer)
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    return trainer, losses


@pytest.fixture(scope="module")
def transformers_run(model_path, bert_tokenizer, train_split, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("transformers-rebalance")
    return rebalance_run(transformers.Trainer, model_path, bert_tokenizer, train_split, tmp)


@pytest.mark.slow
def test_trainer_trains_like_transformers(
    model_path, bert_tokenizer, train_split, tmp_path, transformers_run
):
    ours, ours_losses = rebalance_run(
        fastcollate.Trainer, model_path, bert_tokenizer, train_split, tmp_path / "ours"
    )
    theirs, theirs_losses = transformers_run
    assert len(ours_losses) == 8  # 30 rows, 8 per step, the tail kept: 4 steps, 2 epochs
    assert all(loss == loss and loss > 0 for loss in ours_losses)
    assert ours_losses == theirs_losses

    sampler = ours._get_train_sampler()
    assert isinstance(sampler, BatchRebalanceSampler)
    reference = theirs._get_train_sampler()
    assert type(reference) is hf.BatchRebalanceSampler
    assert sampler.lengths.tolist() == reference.lengths
    assert list(sampler) == list(reference)
    loader = ours.get_train_dataloader()
    # Batches are read straight from Arrow storage.
    assert isinstance(loader.dataset, fastcollate.ArrowBatches)
    assert isinstance(loader.batch_sampler, BatchRebalanceSampler)
    assert len(loader) == len(reference)


def test_patched_transformers_builds_fastcollate_sampler(
    model_path, bert_tokenizer, train_split, tmp_path, transformers_run
):
    with fastcollate.patch_transformers():
        assert hf.BatchRebalanceSampler is BatchRebalanceSampler
        assert transformers.trainer.BatchRebalanceSampler is BatchRebalanceSampler
        trainer, losses = rebalance_run(
            transformers.Trainer, model_path, bert_tokenizer, train_split, tmp_path / "patched"
        )
        assert isinstance(trainer._get_train_sampler(), BatchRebalanceSampler)
    assert hf.BatchRebalanceSampler.__module__ == "transformers.trainer_pt_utils"
    assert losses == transformers_run[1]
