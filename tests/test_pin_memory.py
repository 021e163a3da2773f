"""`pin_memory=True`: batches returned in page-locked host memory. Without CUDA it raises
before padding anything; the default (False) output is what it always was. The tests marked
`cuda` run only where a GPU is present."""

from __future__ import annotations

import types
import warnings

import numpy as np
import pytest
import torch
import transformers
from torch.utils.data import DataLoader

import fastcollate
from fastcollate._internal.tensors import pin_tensors
from fastcollate.integrations.trainer import pins_in_collator

CUDA = torch.cuda.is_available()
cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")
no_cuda = pytest.mark.skipif(CUDA, reason="checks the error raised without CUDA")

ROWS = [
    {"input_ids": [101, 7, 8, 102], "label": 1},
    {"input_ids": [101, 9, 102], "label": 0},
]


@no_cuda
def test_collator_refuses_pin_memory_without_cuda_at_construction(bert_tokenizer):
    with pytest.raises(RuntimeError, match=r"pin_memory=True needs CUDA"):
        fastcollate.DataCollatorWithPadding(bert_tokenizer, pin_memory=True)


@no_cuda
def test_pad_refuses_pin_memory_without_cuda_before_padding():
    rows = [dict(row) for row in ROWS]
    with pytest.raises(RuntimeError, match=r"pin_memory=True needs CUDA"):
        fastcollate.pad(rows, pad_token_id=0, return_tensors="pt", pin_memory=True)
    assert rows == ROWS


def test_pin_memory_needs_torch_tensors(bert_tokenizer):
    # Checked before CUDA, so it says the same on every machine.
    with pytest.raises(ValueError, match=r"pin_memory=True needs return_tensors='pt'"):
        fastcollate.DataCollatorWithPadding(bert_tokenizer, return_tensors="np", pin_memory=True)
    with pytest.raises(ValueError, match=r"pin_memory=True needs return_tensors='pt'"):
        fastcollate.pad(ROWS, pad_token_id=0, return_tensors=None, pin_memory=True)


def test_default_output_is_unchanged(bert_tokenizer):
    collator = fastcollate.DataCollatorWithPadding(bert_tokenizer)
    assert collator.pin_memory is False
    explicit = fastcollate.DataCollatorWithPadding(bert_tokenizer, pin_memory=False)
    theirs = transformers.DataCollatorWithPadding(bert_tokenizer)(ROWS)
    batch, same = collator(ROWS), explicit(ROWS)
    assert list(batch) == list(same) == list(theirs)
    for key in batch:
        assert torch.equal(batch[key], same[key])
        assert torch.equal(batch[key], theirs[key])
        assert batch[key].dtype == theirs[key].dtype
        assert not batch[key].is_pinned()
    # Still the native buffer, shared with numpy (no copy).
    native = fastcollate.pad(ROWS, pad_token_id=0, return_tensors="np")
    shared = torch.from_numpy(native["input_ids"])
    assert shared.data_ptr() == native["input_ids"].__array_interface__["data"][0]


def _pin_in_collate_fn(rows):
    return pin_tensors({"input_ids": torch.tensor(rows)})


def test_pinning_in_a_dataloader_worker_raises():
    loader = DataLoader(
        [[1, 2], [3, 4]], batch_size=2, num_workers=1, collate_fn=_pin_in_collate_fn
    )
    with pytest.raises(RuntimeError, match=r"cannot pin in a DataLoader worker"):
        next(iter(loader))


def _args(pin=True, workers=0):
    return types.SimpleNamespace(dataloader_pin_memory=pin, dataloader_num_workers=workers)


def test_trainer_pins_in_the_collator_only_when_it_can(bert_tokenizer):
    ours = fastcollate.DataCollatorWithPadding(bert_tokenizer)
    assert pins_in_collator(_args(), ours, cuda_available=True)
    assert not pins_in_collator(_args(), ours, cuda_available=False)
    assert not pins_in_collator(_args(pin=False), ours, cuda_available=True)
    assert not pins_in_collator(_args(workers=2), ours, cuda_available=True)
    numpy_out = fastcollate.DataCollatorWithPadding(bert_tokenizer, return_tensors="np")
    assert not pins_in_collator(_args(), numpy_out, cuda_available=True)
    assert not pins_in_collator(_args(), fastcollate.default_data_collator, cuda_available=True)


@no_cuda
def test_trainer_without_cuda_keeps_transformers_dataloader(bert_tokenizer, model_path, tmp_path):
    import datasets

    train = datasets.Dataset.from_list(
        [{"input_ids": [101, 7, 102], "label": 0}, {"input_ids": [101, 8, 9, 102], "label": 1}]
    )
    args = transformers.TrainingArguments(
        str(tmp_path), per_device_train_batch_size=2, report_to=[]
    )
    pin = args.dataloader_pin_memory
    model = transformers.AutoModelForSequenceClassification.from_pretrained(model_path)
    trainer = fastcollate.Trainer(model, args, train_dataset=train, processing_class=bert_tokenizer)
    theirs = transformers.Trainer(model, args, train_dataset=train, processing_class=bert_tokenizer)
    loader = trainer.get_train_dataloader()
    assert theirs.get_train_dataloader().pin_memory == pin
    # Without an accelerator torch pins nothing (and warns when asked): fastcollate does not ask.
    assert loader.pin_memory == (pin and torch.accelerator.is_available())
    assert args.dataloader_pin_memory == pin
    assert trainer.data_collator.pin_memory is False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        batch = next(iter(loader))
    assert not [w for w in caught if "pin_memory" in str(w.message)]
    assert not batch["input_ids"].is_pinned()


@cuda
def test_pinned_batch_equals_the_unpinned_one(bert_tokenizer):
    batch = fastcollate.DataCollatorWithPadding(bert_tokenizer)(ROWS)
    pinned = fastcollate.DataCollatorWithPadding(bert_tokenizer, pin_memory=True)(ROWS)
    assert list(pinned) == list(batch)
    for key in batch:
        assert pinned[key].is_pinned()
        assert torch.equal(pinned[key], batch[key])
        assert torch.equal(pinned[key].to("cuda", non_blocking=True).cpu(), batch[key])
    one = fastcollate.pad(ROWS[0], pad_token_id=0, return_tensors="pt", pin_memory=True)
    assert one["input_ids"].is_pinned()
    assert np.array_equal(one["input_ids"].numpy(), ROWS[0]["input_ids"])


@cuda
def test_trainer_on_a_gpu_pins_in_the_collator(bert_tokenizer, model_path, tmp_path):
    import datasets

    train = datasets.Dataset.from_list(
        [{"input_ids": [101, 7, 102], "label": 0}, {"input_ids": [101, 8, 9, 102], "label": 1}]
    )
    args = transformers.TrainingArguments(
        str(tmp_path), per_device_train_batch_size=2, report_to=[]
    )
    model = transformers.AutoModelForSequenceClassification.from_pretrained(model_path)
    trainer = fastcollate.Trainer(model, args, train_dataset=train, processing_class=bert_tokenizer)
    loader = trainer.get_train_dataloader()
    assert loader.pin_memory is False
    assert args.dataloader_pin_memory is True  # restored
    assert trainer.data_collator.pin_memory is False
    batch = next(iter(loader))
    assert batch["input_ids"].device.type == "cuda"  # accelerate moved it; the host copy was pinned
