"""Differential tests: fastcollate.DataCollatorForMultipleChoice against transformers' own on the
same examples (a real BERT tokenizer), every option, list / numpy / torch choices, both sides."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import transformers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastcollate
from tests.support.compare import assert_same_batch
from tests.support.hypothesis_profiles import examples as example_count

pytestmark = pytest.mark.parity

FORMATS = ("list", "numpy", "torch")


def as_format(values: list[int], fmt: str):
    if fmt == "numpy":
        return np.array(values, dtype=np.int64)
    if fmt == "torch":
        return torch.tensor(values, dtype=torch.int64)
    return values


@st.composite
def examples(draw):
    batch = draw(st.integers(1, 4))
    choices = draw(st.integers(1, 4))
    fmt = draw(st.sampled_from(FORMATS))
    with_types = draw(st.booleans())
    label_name = draw(st.sampled_from(["label", "labels"]))
    out = []
    for _ in range(batch):
        example: dict = {"input_ids": [], "attention_mask": []}
        if with_types:
            example["token_type_ids"] = []
        for _ in range(choices):
            length = draw(st.integers(1, 12))
            ids = draw(st.lists(st.integers(1000, 5000), min_size=length, max_size=length))
            example["input_ids"].append(as_format(ids, fmt))
            example["attention_mask"].append(as_format([1] * length, fmt))
            if with_types:
                split = draw(st.integers(0, length))
                example["token_type_ids"].append(
                    as_format([0] * split + [1] * (length - split), fmt)
                )
        example[label_name] = draw(st.integers(0, choices - 1))
        out.append(example)
    return out


@st.composite
def options(draw):
    padding = draw(st.sampled_from([True, "longest", "max_length"]))
    opts = {"padding": padding, "pad_to_multiple_of": draw(st.sampled_from([None, 1, 4, 8]))}
    if padding == "max_length":
        opts["max_length"] = draw(st.sampled_from([12, 16, 20]))
    return opts


@settings(
    max_examples=example_count(80), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(batch=examples(), opts=options(), side=st.sampled_from(["right", "left"]))
def test_multiple_choice_matches_transformers(bert_tokenizer, batch, opts, side):
    bert_tokenizer.padding_side = side
    try:
        # Each side its own rows: some transformers releases (5.20) pop the label from them.
        theirs = transformers.DataCollatorForMultipleChoice(bert_tokenizer, **opts)(
            copy.deepcopy(batch))
        ours = fastcollate.DataCollatorForMultipleChoice(bert_tokenizer, **opts)(batch)
    finally:
        bert_tokenizer.padding_side = "right"
    assert_same_batch(ours, theirs)


def test_numpy_output_has_the_torch_output_values(bert_tokenizer):
    batch = [
        {"input_ids": [[101, 7, 102], [101, 102]], "label": 1},
        {"input_ids": [[101, 102], [101, 5, 6, 102]], "label": 0},
    ]
    pt = fastcollate.DataCollatorForMultipleChoice(bert_tokenizer)(batch)
    np_batch = fastcollate.DataCollatorForMultipleChoice(bert_tokenizer, return_tensors="np")(batch)
    assert list(np_batch) == list(pt)
    for key in pt:
        np.testing.assert_array_equal(np_batch[key], pt[key].numpy())
    assert np_batch["input_ids"].shape == (2, 2, 4)


def test_unequal_choice_counts_name_the_row(bert_tokenizer):
    batch = [
        {"input_ids": [[101, 102], [101, 102]], "label": 0},
        {"input_ids": [[101, 102]], "label": 0},
    ]
    with pytest.raises(ValueError, match="'input_ids' in row 1 holds 1 choices"):
        fastcollate.DataCollatorForMultipleChoice(bert_tokenizer)(batch)


def test_float_labels_truncate_and_nan_raises(bert_tokenizer):
    batch = [{"input_ids": [[101, 102]], "label": 1.7}, {"input_ids": [[101, 102]], "label": 0}]
    theirs = transformers.DataCollatorForMultipleChoice(bert_tokenizer)(copy.deepcopy(batch))
    ours = fastcollate.DataCollatorForMultipleChoice(bert_tokenizer)(batch)
    assert_same_batch(ours, theirs)
    batch[1]["label"] = float("nan")
    with pytest.raises(ValueError, match="'label' in row 1 holds NaN"):
        fastcollate.DataCollatorForMultipleChoice(bert_tokenizer)(batch)
