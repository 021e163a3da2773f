"""A `set_format("torch")` dataset of integer columns is read through the Arrow path by
`fastcollate.Trainer` (arrow/trainer_datasets): every collator that reads Arrow gives the
batches it gives for the dataset's tensor rows today, the caller's dataset keeps its format,
and a dataset whose tensor rows could collate otherwise (floats, booleans, uint64, a dtype
given to the format, nulls) is left to its rows."""

from __future__ import annotations

import copy

import datasets
import numpy as np
import pytest
import torch
import transformers
from torch.utils.data import DataLoader

import fastcollate
from fastcollate import ArrowBatches
from fastcollate.arrow import trainer_datasets
from fastcollate.arrow.trainer_datasets import unwrap, wrap_for_trainer
from tests.support.arrow_parity import imdb_like, tiny_bert
from tests.support.compare import assert_same_batch

pytestmark = pytest.mark.parity

datasets.disable_progress_bars()


def token_dataset(rows=30, fixed=None, seed=0):
    """Token rows with int32 ids, int8 masks, uint16 token type ids, an int64 label and int16
    per-token labels, cut into chunks and shuffled (an indices mapping)."""
    rng = np.random.default_rng(seed)
    lengths = np.full(rows, fixed) if fixed else rng.integers(1, 30, rows)
    features = datasets.Features({
        "input_ids": datasets.List(datasets.Value("int32")),
        "attention_mask": datasets.List(datasets.Value("int8")),
        "token_type_ids": datasets.List(datasets.Value("uint16")),
        "label": datasets.Value("int64"),
        "labels": datasets.List(datasets.Value("int16")),
    })
    pieces = [
        datasets.Dataset.from_dict({
            "input_ids": [rng.integers(1000, 30000, n).tolist() for n in part],
            "attention_mask": [[1] * n for n in part],
            "token_type_ids": [[0] * n for n in part],
            "label": rng.integers(0, 2, len(part)).tolist(),
            "labels": [rng.integers(0, 5, n).tolist() for n in part],
        }, features=features)
        for part in np.array_split(lengths, 3)
    ]
    return datasets.concatenate_datasets(pieces).shuffle(seed=seed)


def collators(tokenizer):
    """name -> (collator, columns left out, rows of one length)."""
    left = copy.copy(tokenizer)
    left.padding_side = "left"
    return {
        "padding": (fastcollate.DataCollatorWithPadding(tokenizer), ["labels"], False),
        "padding np": (
            fastcollate.DataCollatorWithPadding(tokenizer, return_tensors="np"), ["labels"],
            False),
        "padding to max_length, left": (
            fastcollate.DataCollatorWithPadding(left, padding="max_length", max_length=40,
                                                pad_to_multiple_of=8), ["labels"], False),
        "default": (fastcollate.default_data_collator, ["labels"], True),
        "DefaultDataCollator np": (
            fastcollate.DefaultDataCollator(return_tensors="np"), [], True),
        "token classification": (
            fastcollate.DataCollatorForTokenClassification(tokenizer), ["label"], False),
        "seq2seq": (fastcollate.DataCollatorForSeq2Seq(tokenizer), ["label"], False),
        "flattening": (fastcollate.DataCollatorWithFlattening(), ["label", "token_type_ids"],
                       False),
        "masked LM": (
            fastcollate.DataCollatorForLanguageModeling(tokenizer, seed=5), ["label", "labels"],
            False),
        "causal LM": (
            fastcollate.DataCollatorForLanguageModeling(tokenizer, mlm=False),
            ["label", "labels"], False),
    }


NAMES = ["padding", "padding np", "padding to max_length, left", "default",
         "DefaultDataCollator np", "token classification", "seq2seq", "flattening", "masked LM",
         "causal LM"]


def batches(dataset, collator):
    torch.manual_seed(11)
    generator = torch.Generator().manual_seed(7)
    loader = DataLoader(dataset, batch_size=6, shuffle=True, generator=generator,
                        collate_fn=collator)
    return list(loader)


@pytest.mark.parametrize("name", NAMES)
def test_torch_formatted_datasets_give_todays_batches(bert_tokenizer, name):
    collator, left_out, fixed = collators(bert_tokenizer)[name]
    dataset = token_dataset(fixed=12 if fixed else None).remove_columns(left_out)
    dataset = dataset.with_format("torch")
    wrapped = wrap_for_trainer(dataset, collator)
    assert isinstance(wrapped, ArrowBatches)
    assert unwrap(wrapped).format["type"] is None  # an unformatted view of the same table
    assert dataset.format["type"] == "torch"  # the caller's dataset is left as it was
    # A fresh collator for each run: a seeded masking collator counts its batches.
    ours = batches(wrapped, collator)
    theirs = batches(dataset, collators(bert_tokenizer)[name][0])
    assert len(ours) == len(theirs) == 5
    for a, b in zip(ours, theirs, strict=True):
        assert type(a) is type(b)
        assert_same_batch(dict(a), dict(b))


def test_format_columns_are_the_rows_columns(bert_tokenizer):
    collator = fastcollate.DataCollatorWithPadding(bert_tokenizer)
    dataset = token_dataset().remove_columns(["labels"])
    dataset.set_format("torch", columns=["input_ids", "label"])
    wrapped = wrap_for_trainer(dataset, collator)
    assert wrapped.columns == ["input_ids", "label"]
    dataset.set_format("torch", columns=["input_ids", "label"], output_all_columns=True)
    wrapped = wrap_for_trainer(dataset, collator)
    assert wrapped.columns == ["input_ids", "attention_mask", "token_type_ids", "label"]
    for a, b in zip(batches(wrapped, collator), batches(dataset, collator), strict=True):
        assert_same_batch(dict(a), dict(b))


@pytest.mark.parametrize("case", ["float", "bool", "uint64", "format dtype", "null", "numpy"])
def test_tensor_rows_that_may_collate_otherwise_stay_rows(bert_tokenizer, case):
    collator = fastcollate.DataCollatorWithPadding(bert_tokenizer)
    dataset = token_dataset().remove_columns(["labels"])
    if case in ("float", "bool", "uint64"):
        value = {"float": "float64", "bool": "bool", "uint64": "uint64"}[case]
        dataset = dataset.cast_column("label", datasets.Value(value))
    if case == "null":
        dataset = dataset.map(lambda row, i: {"label": None if i == 3 else row["label"]},
                              with_indices=True)
    if case == "format dtype":
        dataset = dataset.with_format("torch", dtype=torch.int32)
    elif case == "numpy":
        dataset = dataset.with_format("numpy")
    else:
        dataset = dataset.with_format("torch")
    assert wrap_for_trainer(dataset, collator) is dataset


def test_the_trainer_reads_a_torch_formatted_dataset_from_arrow(bert_tokenizer, tmp_path,
                                                                 monkeypatch):
    dataset = imdb_like(rows=40).add_column("text", ["unused"] * 40).with_format("torch")
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), per_device_train_batch_size=8, report_to=[], use_cpu=True)
    runs = []
    for arrow in (False, True):
        with monkeypatch.context() as patch:
            if not arrow:
                patch.setattr(trainer_datasets, "_tensor_rows_are_python_rows", lambda d: False)
            # accelerate's seedable sampler takes torch's initial seed when it is made.
            torch.manual_seed(1)
            trainer = fastcollate.Trainer(model=tiny_bert(), args=args, train_dataset=dataset,
                                          processing_class=bert_tokenizer)
            loader = trainer.get_train_dataloader()
        assert isinstance(loader.dataset, ArrowBatches) == arrow
        torch.manual_seed(1)
        runs.append(list(loader))
    theirs, ours = runs
    assert dataset.format["type"] == "torch" and "text" in dataset.column_names
    assert len(ours) == len(theirs) == 5
    for a, b in zip(ours, theirs, strict=True):
        assert type(a) is type(b)
        assert_same_batch(dict(a), dict(b))
