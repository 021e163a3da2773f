"""Seeded native masks per epoch: with `seed=`, a batch's masks are a pure function of (seed,
epoch, DataLoader worker, batch within the epoch) -- different every epoch, the same run to
run -- whether the epoch comes from `set_epoch` or from the DataLoader restarting its workers,
under fork and spawn, with persistent workers or not. mask_rng="torch" stays transformers'."""

from __future__ import annotations

import copy
import multiprocessing
import pickle

import numpy as np
import pytest
import torch
import transformers
from packaging.version import Version
from torch.utils.data import DataLoader

import fastcollate
from tests.support.compare import assert_same_batch

pytestmark = pytest.mark.multiprocess

HAS_FORK = "fork" in multiprocessing.get_all_start_methods()
# The workers' start method where a test's point is not fork itself (Windows has no fork).
CONTEXT = "fork" if HAS_FORK else "spawn"
requires_fork = pytest.mark.skipif(
    not HAS_FORK, reason="the fork start method is unavailable on this platform"
)

ROWS = [{"input_ids": [101, *range(2000 + i, 2040 + i), 102]} for i in range(16)]
EPOCHS = 2


def collator(tokenizer, **options):
    return fastcollate.DataCollatorForLanguageModeling(tokenizer, seed=5, **options)


def epoch_masks(tokenizer, *, context=CONTEXT, persistent=False, set_epoch=False, torch_seed=0):
    """Each epoch's batch labels (batches alternate between the two workers)."""
    torch.manual_seed(torch_seed)  # the DataLoader's base seeds: must not matter
    collate = collator(tokenizer)
    loader = DataLoader(
        ROWS,
        batch_size=4,
        num_workers=2,
        collate_fn=collate,
        persistent_workers=persistent,
        multiprocessing_context=context,
    )
    epochs = []
    for epoch in range(EPOCHS):
        if set_epoch:
            collate.set_epoch(epoch)
        epochs.append([batch["labels"] for batch in loader])
    return epochs


def in_main_process(tokenizer):
    """What the workers should give: worker w masks batches w, w + 2, ... of each epoch, as the
    w-th, (w+1)-th... batch of that worker and epoch; computed here by keying the stream by
    hand through a collator told the epoch (worker 0 is the main process's key)."""
    collate = collator(tokenizer)
    epochs = []
    for epoch in range(EPOCHS):
        collate.set_epoch(epoch)
        epochs.append([collate(ROWS[4 * b : 4 * b + 4])["labels"] for b in (0, 2)])
    return epochs


def assert_equal_epochs(a, b):
    for epoch_a, epoch_b in zip(a, b, strict=True):
        for x, y in zip(epoch_a, epoch_b, strict=True):
            assert torch.equal(x, y)


def assert_masks_vary(epochs):
    flat = [labels for epoch in epochs for labels in epoch]
    for i in range(len(flat)):
        assert (flat[i] != -100).any()
        for j in range(i):
            assert not torch.equal(flat[i], flat[j]), f"batches {j} and {i} have the same masks"


@pytest.mark.parametrize(
    "persistent, set_epoch",
    [(False, False), (False, True), (True, True)],
    ids=["restarted-workers", "restarted-workers-set_epoch", "persistent-set_epoch"],
)
@requires_fork
def test_fork_workers_mask_by_seed_epoch_worker_and_batch(bert_tokenizer, persistent, set_epoch):
    first = epoch_masks(bert_tokenizer, persistent=persistent, set_epoch=set_epoch)
    assert_masks_vary(first)  # across epochs, workers and batches
    again = epoch_masks(bert_tokenizer, persistent=persistent, set_epoch=set_epoch, torch_seed=9)
    assert_equal_epochs(first, again)
    # Every configuration gives the same masks: they depend on nothing else.
    reference = epoch_masks(bert_tokenizer, set_epoch=True)
    assert_equal_epochs(first, reference)
    # Worker 0's batches are what the main process masks (worker id 0) for the same epoch.
    for epoch, expected in enumerate(in_main_process(bert_tokenizer)):
        assert torch.equal(first[epoch][0], expected[0])
        assert torch.equal(first[epoch][2], expected[1])


def test_persistent_workers_never_told_the_epoch_count_on(bert_tokenizer):
    first = epoch_masks(bert_tokenizer, persistent=True)
    assert_masks_vary(first)
    assert_equal_epochs(first, epoch_masks(bert_tokenizer, persistent=True, torch_seed=3))


@pytest.mark.parametrize(
    "persistent, set_epoch", [(False, False), (True, True)], ids=["restarted", "persistent"]
)
@requires_fork
def test_spawn_workers_mask_as_fork_workers(bert_tokenizer, persistent, set_epoch):
    spawned = epoch_masks(
        bert_tokenizer, context="spawn", persistent=persistent, set_epoch=set_epoch
    )
    assert_equal_epochs(spawned, epoch_masks(bert_tokenizer, set_epoch=True))


def test_set_epoch_restarts_the_batch_count(bert_tokenizer):
    collate = collator(bert_tokenizer)
    rows = ROWS[:4]
    before = [collate(rows)["labels"] for _ in range(2)]  # epoch 0 by default
    collate.set_epoch(1)
    one = [collate(rows)["labels"] for _ in range(2)]
    collate.set_epoch(0)
    assert all(torch.equal(a, collate(rows)["labels"]) for a in before)
    assert not any(torch.equal(a, b) for a in before for b in one)
    fresh = collator(bert_tokenizer)
    fresh.set_epoch(1)
    assert torch.equal(fresh(rows)["labels"], one[0])


def test_copies_keep_the_epoch_with_memory_of_their_own(bert_tokenizer):
    collate = collator(bert_tokenizer)
    collate.set_epoch(3)
    expected = collator(bert_tokenizer)
    expected.set_epoch(3)
    want = expected(ROWS[:4])
    for copied in (copy.deepcopy(collate), pickle.loads(pickle.dumps(collate))):
        assert_same_batch(copied(ROWS[:4]), want)
        copied.set_epoch(4)  # its own memory: the original stays at epoch 3
    assert_same_batch(collate(ROWS[:4]), want)


@pytest.mark.parametrize("epoch", [-1, 2**31 - 1, 2**40])
def test_set_epoch_checks_the_range(bert_tokenizer, epoch):
    with pytest.raises(ValueError, match="epoch must lie"):
        collator(bert_tokenizer).set_epoch(epoch)


@pytest.mark.parametrize("epoch", ["1", 1.0, True, None])
def test_set_epoch_takes_an_int(bert_tokenizer, epoch):
    with pytest.raises(TypeError, match="set_epoch takes an int"):
        collator(bert_tokenizer).set_epoch(epoch)


def test_set_epoch_takes_numpy_ints(bert_tokenizer):
    collate = collator(bert_tokenizer)
    collate.set_epoch(np.int64(2))
    expected = collator(bert_tokenizer)
    expected.set_epoch(2)
    assert_same_batch(collate(ROWS[:4]), expected(ROWS[:4]))


def test_torch_masks_stay_transformers(bert_tokenizer):
    ours = collator(bert_tokenizer, mask_rng="torch")
    ours.set_epoch(1)
    theirs = transformers.DataCollatorForLanguageModeling(bert_tokenizer, seed=5)
    assert_same_batch(ours(copy.deepcopy(ROWS[:4])), theirs(copy.deepcopy(ROWS[:4])))


def forked_worker_labels(collate):
    """The labels a forked DataLoader worker gives after the main process made a batch (and
    with it a seeded generator), then a numpy batch in the main process."""
    collate(copy.deepcopy(ROWS[:4]))
    loader = DataLoader(
        copy.deepcopy(ROWS[:8]),
        batch_size=4,
        num_workers=1,
        collate_fn=collate,
        multiprocessing_context="fork",
    )
    labels = [batch["labels"] for batch in loader]
    numpy_batch = collate(copy.deepcopy(ROWS[:4]), return_tensors="np")
    labels.append(torch.from_numpy(numpy_batch["labels"]))
    return labels


@pytest.mark.skipif(
    Version(transformers.__version__) < Version("5.24"),
    reason="transformers before 5.24 reused the parent's generator in forked workers",
)
@requires_fork
def test_torch_masks_make_a_generator_per_process_and_kind_as_transformers_does(bert_tokenizer):
    ours = forked_worker_labels(collator(bert_tokenizer, mask_rng="torch"))
    reference = transformers.DataCollatorForLanguageModeling(bert_tokenizer, seed=5)
    theirs = forked_worker_labels(reference)
    assert len(ours) == len(theirs) == 3
    for a, b in zip(ours, theirs, strict=True):
        assert torch.equal(a, b)


def test_trainer_tells_the_collator_each_epoch(bert_tokenizer, tmp_path):
    config = transformers.BertConfig(
        vocab_size=len(bert_tokenizer),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=16,
    )
    model = transformers.BertForMaskedLM(config)
    collate = collator(bert_tokenizer)
    told = []
    original = collate.set_epoch
    collate.set_epoch = lambda epoch: (told.append(epoch), original(epoch))
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path),
        num_train_epochs=3,
        per_device_train_batch_size=4,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
    )
    trainer = fastcollate.Trainer(model, args, train_dataset=ROWS[:8], data_collator=collate)
    trainer.train()
    assert told == [0, 1, 2]


def test_compare_exchange_checks_its_cells():
    from fastcollate import _native

    cells = np.zeros(2, dtype=np.int64)
    assert _native.compare_exchange(cells, 1, 0, 7) == 0 and cells[1] == 7
    assert _native.compare_exchange(cells, 1, 0, 9) == 7 and cells[1] == 7  # no swap
    with pytest.raises(ValueError, match="out of range"):
        _native.compare_exchange(cells, 2, 0, 1)
    cells.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        _native.compare_exchange(cells, 0, 0, 1)
    with pytest.raises(ValueError, match="C-contiguous"):
        _native.compare_exchange(np.zeros(4, dtype=np.int64)[::2], 0, 0, 1)
    with pytest.raises(TypeError):
        _native.compare_exchange(np.zeros(2, dtype=np.int32), 0, 0, 1)


@pytest.mark.parametrize("set_epoch", [False, True], ids=["counted", "set_epoch"])
def test_batches_masked_before_the_workers_start_do_not_shift_theirs(bert_tokenizer, set_epoch):
    collate = collator(bert_tokenizer)
    if set_epoch:
        collate.set_epoch(0)
    collate(ROWS[:4])  # in the main process, before the DataLoader forks its workers
    loader = DataLoader(ROWS, batch_size=4, num_workers=2, collate_fn=collate)
    reference = epoch_masks(bert_tokenizer, set_epoch=True)[0]
    for got, expected in zip(loader, reference, strict=True):
        assert torch.equal(got["labels"], expected)
