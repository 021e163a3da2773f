"""`DataCollatorWithPadding` takes its planned call for an `ArrowBatch` as for a list of rows:
after a call settles the options, the next batches go straight to one native call (no `pad()`,
no plan rebuilt), with the batches and errors of the unplanned call, of the row path and of
transformers' collator, and every change to the tokenizer or the collator's fields between two
batches shows in the next one."""

from __future__ import annotations

import copy
import warnings

import datasets
import pytest
import transformers
from hypothesis import given
from hypothesis import strategies as st
from transformers import AutoTokenizer

import fastcollate
from fastcollate import ArrowBatch, ArrowBatches
from fastcollate.collators import padding as padding_module
from tests.support.arrow_parity import (
    SETTINGS,
    assert_arrow_equals_rows,
    batch_of,
    imdb_like,
    padded_datasets,
    padding_options,
)
from tests.support.compare import assert_same_batch
from tests.support.tokenizer_changes import CHANGES

pytestmark = pytest.mark.parity

datasets.disable_progress_bars()


class Unplanned:
    """Counts `pad()` calls and plan settlements of DataCollatorWithPadding."""

    def __init__(self, monkeypatch):
        self.pads = 0
        self.plans = 0
        pad, plan = padding_module.pad, padding_module.DataCollatorWithPadding._plan_next_call

        def counting_pad(*args, **kwargs):
            self.pads += 1
            return pad(*args, **kwargs)

        def counting_plan(collator):
            self.plans += 1
            return plan(collator)

        monkeypatch.setattr(padding_module, "pad", counting_pad)
        monkeypatch.setattr(padding_module.DataCollatorWithPadding, "_plan_next_call",
                            counting_plan)


def arrow_and_rows(dataset, indices):
    batch, rows = batch_of(dataset, indices)
    return batch, [dict(row) for row in rows]


def test_an_arrow_batch_takes_the_planned_call(bert_tokenizer, monkeypatch):
    counts = Unplanned(monkeypatch)
    dataset = imdb_like(rows=40)
    collator = fastcollate.DataCollatorWithPadding(bert_tokenizer)
    theirs = transformers.DataCollatorWithPadding(bert_tokenizer)
    wrapper = ArrowBatches(dataset)
    for start in range(0, 40, 8):
        indices = list(range(start, start + 8))
        ours = collator(wrapper.__getitems__(indices))
        assert isinstance(ours, transformers.BatchEncoding)
        assert_same_batch(ours, theirs(dataset.__getitems__(indices)))
    # Only the first batch went through pad() and settled the plan.
    assert (counts.pads, counts.plans) == (1, 1)
    assert collator._call_plan is not None


@SETTINGS
@given(
    case=padded_datasets(),
    options=padding_options,
    side=st.sampled_from(["left", "right"]),
    return_tensors=st.sampled_from(["pt", "np"]),
)
def test_planned_arrow_calls_equal_the_row_path(bert_tokenizer, case, options, side,
                                                return_tensors):
    # The same collator, called again and again: its first call settles the plan, the next
    # ones take it; each equals what a fresh collator gives for the rows (or the same error).
    dataset, indices = case
    tokenizer = copy.copy(bert_tokenizer)
    tokenizer.padding_side = side
    options = {**options, "return_tensors": return_tensors}
    collator = fastcollate.DataCollatorWithPadding(tokenizer, **options)

    def call(features):
        # The Arrow batch through the collator kept between calls, the rows through a new one.
        if isinstance(features, ArrowBatch):
            return collator(features)
        return fastcollate.DataCollatorWithPadding(tokenizer, **options)(features)

    for _ in range(3):
        batch, rows = arrow_and_rows(dataset, indices)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert_arrow_equals_rows(call, batch, rows)


@pytest.fixture
def fresh_tokenizer(model_path):
    return AutoTokenizer.from_pretrained(model_path)


def _same_outcome(ours, theirs, dataset, indices):
    """The Arrow batch through `ours` gives what transformers' collator gives for the rows,
    or the same exception type."""
    batch, rows = arrow_and_rows(dataset, indices)
    try:
        expected = theirs(rows)
    except (ValueError, TypeError) as err:
        with pytest.raises(type(err)):
            ours(batch)
        return
    assert_same_batch(ours(batch), expected)


@pytest.mark.parametrize("padding", [True, "max_length"])
@pytest.mark.parametrize("change", list(CHANGES), ids=list(CHANGES))
def test_the_planned_arrow_call_sees_a_tokenizer_change(fresh_tokenizer, change, padding):
    # No attention mask in the rows: padding makes one (or not, as model_input_names say).
    dataset = imdb_like(rows=12).remove_columns(["attention_mask"])
    tok = fresh_tokenizer
    fields = {"padding": padding, "max_length": 48 if padding == "max_length" else None}
    ours = fastcollate.DataCollatorWithPadding(tok, **fields)
    theirs = transformers.DataCollatorWithPadding(tok, **fields)
    for _ in range(2):
        _same_outcome(ours, theirs, dataset, [0, 3, 5])
    assert ours._call_plan is not None, "the call plan is not used"
    for step in CHANGES[change]:
        step(tok)
        _same_outcome(ours, theirs, dataset, [1, 2, 7])
        _same_outcome(ours, theirs, dataset, [4, 8])


@pytest.mark.parametrize(
    ("name", "value"),
    [("padding", "max_length"), ("max_length", 64), ("pad_to_multiple_of", 8),
     ("return_tensors", "np"), ("tokenizer", "left")],
)
def test_the_planned_arrow_call_sees_a_field_change(model_path, name, value):
    dataset = imdb_like(rows=12)
    tok = AutoTokenizer.from_pretrained(model_path)
    ours = fastcollate.DataCollatorWithPadding(tok, max_length=48)
    theirs = transformers.DataCollatorWithPadding(tok, max_length=48)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(2):
            _same_outcome(ours, theirs, dataset, [0, 3, 5])
        assert ours._call_plan is not None
        if name == "tokenizer":
            value = AutoTokenizer.from_pretrained(model_path, padding_side=value)
        setattr(ours, name, value)
        setattr(theirs, name, value)
        _same_outcome(ours, theirs, dataset, [1, 2, 7])
        _same_outcome(ours, theirs, dataset, [4, 8])


def test_the_planned_arrow_call_raises_as_pad_does(bert_tokenizer):
    collator = fastcollate.DataCollatorWithPadding(bert_tokenizer)
    dataset = imdb_like(rows=8)
    collator(ArrowBatches(dataset).__getitems__([0, 1]))
    assert collator._call_plan is not None
    # Rows without the main input: pad's error, naming it.
    without = ArrowBatches(dataset, columns=["attention_mask", "label"]).__getitems__([0, 1])
    with pytest.raises(ValueError) as planned:
        collator(without)
    with pytest.raises(ValueError) as unplanned:
        fastcollate.DataCollatorWithPadding(bert_tokenizer)(without)
    assert str(planned.value) == str(unplanned.value)
    # A bad index: the native error, the same both ways.
    bad = ArrowBatches(dataset).__getitems__([0, 99])
    with pytest.raises(IndexError) as planned_index:
        collator(bad)
    with pytest.raises(IndexError) as unplanned_index:
        fastcollate.DataCollatorWithPadding(bert_tokenizer)(bad)
    assert str(planned_index.value) == str(unplanned_index.value)


def test_the_planned_arrow_call_warns_of_an_ignored_max_length(bert_tokenizer):
    collator = fastcollate.DataCollatorWithPadding(bert_tokenizer, max_length=16)
    batch = ArrowBatches(imdb_like(rows=8)).__getitems__([0, 1])
    for _ in range(2):
        with pytest.warns(UserWarning, match="max_length"):
            collator(batch)
    assert collator._call_plan is not None
