"""Batches collated in DataLoader workers reach the main process as views of one shared storage
(one segment, one descriptor per batch), the same batches as without workers, under fork and
spawn; FASTCOLLATE_WORKER_SHARING=0 leaves torch's per-tensor hand-over; nothing leaks."""

from __future__ import annotations

import gc
import multiprocessing
import os
import random

import pytest
import torch
from torch.utils.data import DataLoader

import fastcollate
from fastcollate._internal.worker_handover import share_batch

# Those that start DataLoader workers (left out of the default run).
multiprocess = pytest.mark.multiprocess

CONTEXTS = ["fork", "spawn"] if "fork" in multiprocessing.get_all_start_methods() else ["spawn"]


def token_rows(tokenizer, count=24, seed=0):
    rng = random.Random(seed)
    words = ["film", "plot", "dull", "great", "actor", "scene", "long", "fun", "bad", "good"]
    rows = []
    for i in range(count):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(3, 40)))
        row = dict(tokenizer(text))
        row["labels"] = i % 2
        rows.append(row)
    return rows


def tagged_rows(tokenizer):
    rows = token_rows(tokenizer)
    for row in rows:
        row["labels"] = [i % 5 for i in range(len(row["input_ids"]))]
    return rows


def seq2seq_rows(tokenizer):
    rows = token_rows(tokenizer)
    for i, row in enumerate(rows):
        row["labels"] = list(range(100, 103 + i % 7))
    return rows


def lm_rows(tokenizer):
    return [{"input_ids": row["input_ids"]} for row in token_rows(tokenizer)]


CASES = {
    "padding": (lambda t: fastcollate.DataCollatorWithPadding(t), token_rows),
    "token_classification": (lambda t: fastcollate.DataCollatorForTokenClassification(t),
                             tagged_rows),
    "seq2seq": (lambda t: fastcollate.DataCollatorForSeq2Seq(t), seq2seq_rows),
    "language_modeling": (lambda t: fastcollate.DataCollatorForLanguageModeling(t, mlm=False),
                          lm_rows),
}


def batches(collate, rows, workers, context=None, **options):
    loader = DataLoader(rows, batch_size=5, collate_fn=collate, num_workers=workers,
                        multiprocessing_context=context if workers else None, **options)
    return [dict(batch) for batch in loader]


def storages(batch):
    return {value.untyped_storage().data_ptr() for value in batch.values()}


def assert_same_batches(left, right):
    assert len(left) == len(right)
    for a, b in zip(left, right, strict=True):
        assert list(a) == list(b)
        for key in a:
            assert a[key].dtype == b[key].dtype, key
            assert torch.equal(a[key], b[key]), key


@multiprocess
@pytest.mark.parametrize("context", CONTEXTS)
@pytest.mark.parametrize("case", list(CASES))
def test_worker_batches_are_the_main_process_batches_in_one_storage(bert_tokenizer, case,
                                                                    context):
    make, rows_of = CASES[case]
    rows = rows_of(bert_tokenizer)
    expected = batches(make(bert_tokenizer), rows, 0)
    received = batches(make(bert_tokenizer), rows, 2, context)
    assert_same_batches(received, expected)
    for batch in received:
        assert len(batch) >= 2
        assert len(storages(batch)) == 1, case
        assert all(value.is_shared() for value in batch.values())
    for batch in expected:
        assert len(storages(batch)) == len(batch)  # outside a worker nothing changes


@multiprocess
@pytest.mark.parametrize("context", CONTEXTS)
def test_seeded_masking_in_workers_is_unchanged_by_sharing(bert_tokenizer, context, monkeypatch):
    rows = lm_rows(bert_tokenizer)

    def make():
        return fastcollate.DataCollatorForLanguageModeling(bert_tokenizer, seed=7)

    shared = batches(make(), rows, 2, context)
    monkeypatch.setenv("FASTCOLLATE_WORKER_SHARING", "0")
    unshared = batches(make(), rows, 2, context)
    assert_same_batches(shared, unshared)
    assert all(len(storages(batch)) == 1 for batch in shared)
    assert all(len(storages(batch)) == len(batch) for batch in unshared)


@multiprocess
@pytest.mark.parametrize("context", CONTEXTS)
def test_sharing_off_leaves_torchs_hand_over(bert_tokenizer, context, monkeypatch):
    monkeypatch.setenv("FASTCOLLATE_WORKER_SHARING", "0")
    rows = token_rows(bert_tokenizer)
    received = batches(fastcollate.DataCollatorWithPadding(bert_tokenizer), rows, 2, context)
    assert_same_batches(received, batches(fastcollate.DataCollatorWithPadding(bert_tokenizer),
                                          rows, 0))
    for batch in received:
        assert len(storages(batch)) == len(batch)


def open_descriptors():
    return len(os.listdir("/proc/self/fd"))


def shm_entries():
    return len(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else 0


@multiprocess
@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
@pytest.mark.parametrize("persistent", [False, True], ids=["restarted", "persistent"])
@pytest.mark.parametrize("context", CONTEXTS)
def test_no_descriptor_or_segment_left_over_epochs(bert_tokenizer, context, persistent):
    rows = token_rows(bert_tokenizer, count=40)
    loader = DataLoader(rows, batch_size=4, num_workers=2, multiprocessing_context=context,
                        persistent_workers=persistent,
                        collate_fn=fastcollate.DataCollatorWithPadding(bert_tokenizer))
    counts = []
    for _ in range(5):
        epoch = [dict(batch) for batch in loader]
        assert all(len(storages(batch)) == 1 for batch in epoch)
        del epoch
        gc.collect()
        counts.append((open_descriptors(), shm_entries()))
    # The first epoch opens what the loader keeps (persistent workers' pipes); none after.
    assert counts[-1][0] <= counts[1][0], counts
    assert counts[-1][1] <= counts[1][1], counts


@multiprocess
@pytest.mark.skipif(not torch.cuda.is_available(), reason="pinning needs CUDA")
def test_pin_memory_reads_the_shared_views(bert_tokenizer):
    rows = token_rows(bert_tokenizer)
    expected = batches(fastcollate.DataCollatorWithPadding(bert_tokenizer), rows, 0)
    pinned = batches(fastcollate.DataCollatorWithPadding(bert_tokenizer), rows, 2, "spawn",
                     pin_memory=True)
    assert_same_batches(pinned, expected)
    assert all(value.is_pinned() for batch in pinned for value in batch.values())


def test_share_batch_copies_into_aligned_views_of_one_storage():
    batch = {
        "input_ids": torch.arange(15).reshape(3, 5),
        "attention_mask": torch.ones(3, 5, dtype=torch.bool),
        "scores": torch.rand(3),
        "empty": torch.zeros(0, 4),
        "text": ["a", "b", "c"],
    }
    before = {key: value.clone() if isinstance(value, torch.Tensor) else value
              for key, value in batch.items()}
    share_batch(batch)
    assert len({batch[key].untyped_storage().data_ptr()
                for key in ("input_ids", "attention_mask", "scores", "empty")}) == 1
    for key, value in before.items():
        if isinstance(value, torch.Tensor):
            assert batch[key].is_shared() and batch[key].is_contiguous()
            assert batch[key].data_ptr() % 64 == 0 or batch[key].numel() == 0
            assert batch[key].dtype == value.dtype and torch.equal(batch[key], value)
        else:
            assert batch[key] is value


def test_share_batch_leaves_single_tensors_and_tracked_ones():
    single = {"input_ids": torch.ones(2, 3, dtype=torch.long)}
    tensor = single["input_ids"]
    assert share_batch(single)["input_ids"] is tensor
    tracked = {"a": torch.ones(2, requires_grad=True), "b": torch.ones(2, requires_grad=True)}
    a = tracked["a"]
    assert share_batch(tracked)["a"] is a
    strided = {"a": torch.ones(3, 4).t(), "b": torch.ones(2), "c": torch.zeros(2)}
    transposed = strided["a"]
    share_batch(strided)
    assert strided["a"] is transposed  # left to torch, strides and all
    assert strided["b"].untyped_storage().data_ptr() == strided["c"].untyped_storage().data_ptr()


def test_outside_a_worker_the_output_is_untouched(bert_tokenizer):
    batch = fastcollate.DataCollatorWithPadding(bert_tokenizer)(token_rows(bert_tokenizer)[:4])
    assert not any(value.is_shared() for value in batch.values())


@multiprocess
def test_trainer_workers_hand_batches_over_in_one_storage(model_path, bert_tokenizer, tmp_path):
    import datasets
    from transformers import AutoModelForSequenceClassification

    texts = [f"sentence {i} " * (1 + i % 4) for i in range(16)]
    train = datasets.Dataset.from_dict({"text": texts, "label": [i % 2 for i in range(16)]})
    train = train.map(lambda batch: bert_tokenizer(batch["text"]), batched=True,
                      remove_columns=["text"])
    args = fastcollate.TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=4,
                                         report_to=[], dataloader_num_workers=2, use_cpu=True)
    model = AutoModelForSequenceClassification.from_pretrained(model_path, num_labels=2)
    trainer = fastcollate.Trainer(model, args, train_dataset=train,
                                  processing_class=bert_tokenizer)
    received = [dict(batch) for batch in trainer.get_train_dataloader()]
    assert len(received) == 4
    for batch in received:
        assert {"input_ids", "attention_mask", "labels"} <= set(batch)
        assert len(storages(batch)) == 1
