"""A `DataCollatorWithPadding` call plan's one native call (`_native.PlannedCall`): which calls
it serves, when it stops holding, and that a served call behaves as transformers' collator
(its warning included). The batches themselves are compared with transformers' throughout the
parity suites; here, the plan's own decisions."""

from __future__ import annotations

import warnings
from collections import UserDict

import numpy as np
import pytest
import torch
import transformers
from transformers import AutoTokenizer

import fastcollate
from fastcollate._internal.main_input import UNUSUAL, usual_main_input_kind
from fastcollate.collators import tokenizer_state
from tests.support.compare import assert_same_batch

ROWS = [
    {"input_ids": [101, 7592, 102], "label": 0},
    {"input_ids": [101, 7592, 2088, 102], "label": 1},
]


def _planned(tokenizer, **fields):
    collator = fastcollate.DataCollatorWithPadding(tokenizer, **fields)
    collator([dict(r) for r in ROWS])
    assert collator._call_plan is not None
    return collator


@pytest.fixture
def tokenizer(model_path):
    return AutoTokenizer.from_pretrained(model_path)


@pytest.mark.parametrize("fmt", ["lists", "numpy", "torch"])
def test_usual_rows_are_served(tokenizer, fmt):
    convert = {"lists": list, "numpy": np.asarray, "torch": torch.tensor}[fmt]
    collator = _planned(tokenizer)
    rows = [{"input_ids": convert(r["input_ids"]), "attention_mask": convert([1] * 3),
             "label": r["label"]} for r in ROWS[:1]]
    served = collator._call_plan.call.rows(collator, rows)
    assert served is not None
    assert_same_batch(served, transformers.DataCollatorWithPadding(tokenizer)(rows))


UNSERVED = {
    "a tuple of rows": lambda: tuple(dict(r) for r in ROWS),
    "no rows": lambda: [],
    "a mapping that is not a dict": lambda: [UserDict(r) for r in ROWS],
    "token ids in a tuple": lambda: [{**r, "input_ids": tuple(r["input_ids"])} for r in ROWS],
    "empty token ids first": lambda: [{"input_ids": [], "label": 0}, dict(ROWS[1])],
    "no token ids": lambda: [{"label": 0}],
    "a stacked attention mask": lambda: [
        {**r, "attention_mask": np.ones((1, 1, 1, len(r["input_ids"])), dtype=np.int64)}
        for r in ROWS
    ],
}


@pytest.mark.parametrize("case", list(UNSERVED), ids=list(UNSERVED))
def test_other_rows_are_left_to_pad_unread(tokenizer, case):
    collator = _planned(tokenizer)
    assert collator._call_plan.call.rows(collator, UNSERVED[case]()) is None


class _ListSubclass(list):
    pass


class _TensorSubclass(torch.Tensor):
    pass


# Row 0's token ids, and their kind by the one rule (`usual_main_input_kind`).
MAIN_INPUT_KINDS = {
    "a list of ints": (lambda: [101, 102], None),
    "a list starting with a bool": (lambda: [True, 102], UNUSUAL),
    "a list starting with a numpy int": (lambda: [np.int64(101), 102], UNUSUAL),
    "an empty list": (lambda: [], UNUSUAL),
    "a tuple": (lambda: (101, 102), UNUSUAL),
    "a list subclass": (lambda: _ListSubclass([101, 102]), UNUSUAL),
    "a numpy array": (lambda: np.array([101, 102]), "np"),
    "a numpy array subclass": (lambda: np.ma.array([101, 102]), UNUSUAL),
    "a torch tensor": (lambda: torch.tensor([101, 102]), "pt"),
    "a torch tensor subclass": (
        lambda: torch.tensor([101, 102]).as_subclass(_TensorSubclass), "pt"),
    "a string": (lambda: "ab", UNUSUAL),
    "None": (lambda: None, UNUSUAL),
}


@pytest.mark.parametrize("case", list(MAIN_INPUT_KINDS), ids=list(MAIN_INPUT_KINDS))
def test_the_planned_call_serves_rows_by_the_one_main_input_rule(tokenizer, case):
    make, kind = MAIN_INPUT_KINDS[case]
    assert usual_main_input_kind(make()) == kind
    collator = _planned(tokenizer)
    served = collator._call_plan.call.rows(collator, [{"input_ids": make(), "label": 0}])
    assert (served is not None) == (kind != UNUSUAL)


CHANGES = {
    "a field replaced": lambda c, t: setattr(c, "padding", "longest"),
    "a field replaced by an equal object": lambda c, t: setattr(c, "max_length", int("512")),
    "the tokenizer's padding side": lambda c, t: setattr(t, "padding_side", "left"),
    "the tokenizer's pad token": lambda c, t: setattr(t, "pad_token", "[UNK]"),
    "the default dtype": lambda c, t: torch.set_default_dtype(torch.float64),
}


@pytest.mark.parametrize("case", list(CHANGES), ids=list(CHANGES))
def test_the_plan_stops_holding_when_what_it_was_settled_from_changes(tokenizer, case):
    collator = _planned(tokenizer, padding="max_length", max_length=512)
    call = collator._call_plan.call
    assert call.holds(collator)
    previous = torch.get_default_dtype()
    try:
        CHANGES[case](collator, tokenizer)
        assert not call.holds(collator)
        assert call.rows(collator, [dict(r) for r in ROWS]) is None
    finally:
        torch.set_default_dtype(previous)


def test_a_tokenizer_whose_instance_dict_is_a_dict_subclass_is_never_taken_as_unchanged(
        tokenizer):
    key = tokenizer_state.state_key(tokenizer)
    assert key is not None and tokenizer_state.has_state_key(tokenizer, key)

    class Attributes(dict):
        pass

    tokenizer.__dict__ = Attributes(tokenizer.__dict__)
    assert not tokenizer_state.has_state_key(tokenizer, key)
    # Still padded as transformers pads, through its attributes.
    expected = transformers.DataCollatorWithPadding(tokenizer)([dict(r) for r in ROWS])
    ours = fastcollate.DataCollatorWithPadding(tokenizer)
    for _ in range(2):
        assert_same_batch(ours([dict(r) for r in ROWS]), expected)


@pytest.mark.parametrize("padding", [True, "max_length"])
def test_a_served_call_warns_of_an_ignored_max_length_as_transformers(tokenizer, padding):
    ours = fastcollate.DataCollatorWithPadding(tokenizer, padding=padding, max_length=8)
    theirs = transformers.DataCollatorWithPadding(tokenizer, padding=padding, max_length=8)
    for _ in range(3):  # the first call settles the plan, the others are served by it
        caught = []
        for collator in (ours, theirs):
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                collator([dict(r) for r in ROWS])
            caught.append([(w.category, str(w.message)) for w in seen])
        assert caught[0] == caught[1]
        assert len(caught[0]) == (1 if padding is True else 0)
    assert ours._call_plan is not None
