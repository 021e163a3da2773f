"""Attention masks of two or more dimensions per example (a 2-d or 4-d mask made for each row):
transformers' tokenizer.pad stacks them as they are instead of padding them. Every entry point
that goes through tokenizer.pad in transformers is compared with it, for torch and numpy masks,
each return type, and masks it cannot stack."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
import torch
import transformers

import fastcollate
from tests.support.compare import assert_same_batch

pytestmark = pytest.mark.parity

LENGTHS = (3, 5, 4)


def _mask(kind: str, shape: str, row: int):
    side = max(LENGTHS)
    full = {"2-d": (side, side), "4-d": (1, 1, side, side)}[shape]
    values = np.tril(np.ones((side, side), dtype=np.int64))
    values[: row + 1, 0] = 0  # each row's mask is its own
    values = values.reshape(full)
    if kind == "torch":
        return torch.from_numpy(values.copy())
    if kind == "numpy":
        return values.copy()
    return values.tolist()  # nested lists: no ndim, padded (and ragged) as transformers does


def _rows(kind: str, shape: str, labels: str | None = None) -> list[dict]:
    rows = []
    for i, n in enumerate(LENGTHS):
        row = {
            "input_ids": [101] + [2000 + i] * (n - 2) + [102],
            "token_type_ids": [0] * n,
            "attention_mask": _mask(kind, shape, i),
        }
        if labels == "label":
            row["label"] = i % 2
        elif labels == "token labels":
            row["labels"] = list(range(n))
        rows.append(row)
    return rows


def _both(make_theirs, make_ours, rows):
    """Both collators' results on copies of the rows, or both errors; the rows unchanged."""
    before = copy.deepcopy(rows)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = make_theirs(copy.deepcopy(rows))
    except Exception:  # noqa: BLE001 - any failure of theirs must be a clear error of ours
        with pytest.raises((ValueError, TypeError)):
            make_ours(rows)
    else:
        assert_same_batch(make_ours(rows), expected)
    for ours_row, original in zip(rows, before, strict=True):
        assert ours_row.keys() == original.keys()
        for key in original:
            assert np.array_equal(np.asarray(ours_row[key]), np.asarray(original[key]))


KINDS = ["torch", "numpy"]
SHAPES = ["2-d", "4-d"]


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("return_tensors", ["pt", "np"])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("kind", KINDS)
def test_with_padding(bert_tokenizer, kind, shape, return_tensors, side):
    tokenizer = copy.deepcopy(bert_tokenizer)
    tokenizer.padding_side = side
    theirs = transformers.DataCollatorWithPadding(tokenizer, return_tensors=return_tensors)
    ours = fastcollate.DataCollatorWithPadding(tokenizer, return_tensors=return_tensors)
    _both(theirs, ours, _rows(kind, shape, labels="label"))


@pytest.mark.parametrize("return_tensors", [None, "pt", "np"])
@pytest.mark.parametrize("return_attention_mask", [None, False])
@pytest.mark.parametrize("kind", KINDS)
def test_pad_list_of_rows(bert_tokenizer, kind, return_attention_mask, return_tensors):
    # Without an attention mask asked for, the stacked masks come last.
    _both(
        lambda rows: bert_tokenizer.pad(
            rows, return_attention_mask=return_attention_mask, return_tensors=return_tensors
        ),
        lambda rows: fastcollate.pad(
            rows,
            bert_tokenizer,
            return_attention_mask=return_attention_mask,
            return_tensors=return_tensors,
        ),
        _rows(kind, "2-d"),
    )


@pytest.mark.parametrize("return_tensors", [None, "pt", "np"])
@pytest.mark.parametrize("kind", KINDS)
def test_pad_mapping_of_lists(bert_tokenizer, kind, return_tensors):
    rows = _rows(kind, "4-d")
    columns = {key: [row[key] for row in rows] for key in rows[0]}
    theirs = bert_tokenizer.pad(copy.deepcopy(columns), return_tensors=return_tensors)
    assert_same_batch(fastcollate.pad(columns, bert_tokenizer, return_tensors=return_tensors),
                      theirs)


@pytest.mark.parametrize("return_tensors", ["pt", "np"])
@pytest.mark.parametrize("kind", KINDS)
def test_token_classification(bert_tokenizer, kind, return_tensors):
    theirs = transformers.DataCollatorForTokenClassification(
        bert_tokenizer, return_tensors=return_tensors
    )
    ours = fastcollate.DataCollatorForTokenClassification(
        bert_tokenizer, return_tensors=return_tensors
    )
    _both(theirs, ours, _rows(kind, "2-d", labels="token labels"))


@pytest.mark.parametrize("return_tensors", ["pt", "np"])
@pytest.mark.parametrize("kind", KINDS)
def test_seq2seq(bert_tokenizer, kind, return_tensors):
    theirs = transformers.DataCollatorForSeq2Seq(bert_tokenizer, return_tensors=return_tensors)
    ours = fastcollate.DataCollatorForSeq2Seq(bert_tokenizer, return_tensors=return_tensors)
    _both(theirs, ours, _rows(kind, "2-d", labels="token labels"))


@pytest.mark.parametrize("kind", KINDS)
def test_language_modeling_without_masking(bert_tokenizer, kind):
    theirs = transformers.DataCollatorForLanguageModeling(bert_tokenizer, mlm=False)
    ours = fastcollate.DataCollatorForLanguageModeling(bert_tokenizer, mlm=False)
    _both(theirs, ours, _rows(kind, "4-d"))


@pytest.mark.parametrize(
    "odd",
    ["other shape", "1-d mask in a later row", "no mask in a later row", "nested lists"],
)
@pytest.mark.parametrize("kind", KINDS)
def test_masks_that_cannot_be_stacked(bert_tokenizer, kind, odd):
    rows = _rows(kind, "2-d", labels="label")
    if odd == "other shape":
        rows[2]["attention_mask"] = rows[2]["attention_mask"][:2]
    elif odd == "1-d mask in a later row":
        rows[1]["attention_mask"] = [1] * LENGTHS[1]
    elif odd == "no mask in a later row":
        del rows[1]["attention_mask"]
    else:
        # Nested lists have no ndim: padded as 1-d masks are, which cannot work.
        rows = _rows("lists", "2-d", labels="label")
    theirs = transformers.DataCollatorWithPadding(bert_tokenizer)
    ours = fastcollate.DataCollatorWithPadding(bert_tokenizer)
    _both(theirs, ours, rows)


def _as_kind(kind: str, values: list):
    return torch.tensor(values) if kind == "torch" else np.array(values)


@pytest.mark.parametrize("return_tensors", ["pt", "np"])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("kind", KINDS)
def test_a_settled_collator_still_stacks_masks_of_its_rows_kind(
    bert_tokenizer, kind, shape, return_tensors
):
    # Token ids and masks as arrays (tensors) of one class: after calls on one-dimensional
    # masks settle the collator's call plan, rows of that class with a stacked mask still go
    # the way transformers takes them.
    theirs = transformers.DataCollatorWithPadding(bert_tokenizer, return_tensors=return_tensors)
    ours = fastcollate.DataCollatorWithPadding(bert_tokenizer, return_tensors=return_tensors)
    flat = [
        {"input_ids": _as_kind(kind, [101] + [2000] * (n - 2) + [102]),
         "attention_mask": _as_kind(kind, [1] * n)}
        for n in LENGTHS
    ]
    for _ in range(2):
        _both(theirs, ours, flat)
    assert ours._call_plan is not None
    stacked = [
        {"input_ids": row["input_ids"], "attention_mask": _mask(kind, shape, i)}
        for i, row in enumerate(flat)
    ]
    _both(theirs, ours, stacked)
    _both(theirs, ours, flat)
