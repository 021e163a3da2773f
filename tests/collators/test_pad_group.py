"""`_native.PadGroup`: the named pad group Python builds once per collator settings and every
native call reads (lead key, pad value, strategy, followers, attention mask)."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from fastcollate import _native

FULL = dict(
    pad_value=3,
    strategy="max_length",
    max_length=8,
    pad_to_multiple_of=4,
    left=True,
    followers=[("token_type_ids", 0, True)],
    attention_mask="attention_mask",
)


def fields(group: _native.PadGroup) -> dict:
    return {name: getattr(group, name) for name in ("lead", *FULL)}


def test_fields_read_back_by_name():
    group = _native.PadGroup("input_ids", **FULL)
    assert fields(group) == {"lead": "input_ids", **FULL}
    plain = _native.PadGroup("labels", pad_value=-100)
    assert fields(plain) == {
        "lead": "labels",
        "pad_value": -100,
        "strategy": "longest",
        "max_length": None,
        "pad_to_multiple_of": None,
        "left": False,
        "followers": [],
        "attention_mask": None,
    }


def test_with_follower_adds_one_and_leaves_the_group_as_it_was():
    group = _native.PadGroup("input_ids", **FULL)
    more = group.with_follower("labels", -100, False)
    assert more.followers == [("token_type_ids", 0, True), ("labels", -100, False)]
    assert fields(group) == {"lead": "input_ids", **FULL}
    assert {k: v for k, v in fields(more).items() if k != "followers"} == {
        k: v for k, v in fields(group).items() if k != "followers"
    }


def test_pickles_and_copies_with_every_field():
    group = _native.PadGroup("input_ids", **FULL)
    for copied in (pickle.loads(pickle.dumps(group)), copy.deepcopy(group), copy.copy(group)):
        assert fields(copied) == fields(group)
    assert repr(group).startswith("PadGroup('input_ids', pad_value=3, strategy='max_length'")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"strategy": "bogus"}, "'bogus' is not a valid padding strategy"),
        ({"strategy": "max_length"}, "padding='max_length' needs a max_length"),
        ({"pad_to_multiple_of": 0}, "pad_to_multiple_of"),
    ],
)
def test_bad_settings_raise_when_the_group_is_made(options, message):
    with pytest.raises(ValueError, match=message):
        _native.PadGroup("input_ids", pad_value=0, **options)


def test_only_the_lead_is_positional():
    with pytest.raises(TypeError):
        _native.PadGroup("input_ids", 0)  # type: ignore[misc]
    with pytest.raises(TypeError):
        _native.PadGroup("input_ids")  # type: ignore[call-arg]


def test_collate_pads_by_the_named_fields():
    rows = [
        {"input_ids": [1, 2, 3], "token_type_ids": [1, 1, 1]},
        {"input_ids": [4], "token_type_ids": [1]},
    ]
    group = _native.PadGroup("input_ids", **FULL)
    out = _native.collate(rows, [group], float32=True)
    np.testing.assert_array_equal(out["input_ids"], [[3] * 5 + [1, 2, 3], [3] * 7 + [4]])
    np.testing.assert_array_equal(out["token_type_ids"], [[0] * 5 + [1] * 3, [0] * 7 + [1]])
    np.testing.assert_array_equal(out["attention_mask"], [[0] * 5 + [1] * 3, [0] * 7 + [1]])
    plan = _native.CollatePlan([group], float32=True)
    planned = _native.collate_planned(rows, plan)
    assert {k: v.tolist() for k, v in planned.items()} == {k: v.tolist() for k, v in out.items()}


def test_a_tuple_is_not_a_pad_group():
    with pytest.raises(TypeError):
        _native.collate(
            [{"input_ids": [1]}],
            [("input_ids", 0, "longest", None, None, False, [], None)],  # type: ignore[list-item]
            float32=True,
        )
