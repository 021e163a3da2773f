"""Differential tests for the native read paths: Python ints at every size boundary (read in
place from the int object on CPython <= 3.14), bools and int subclasses, and torch tensors of
every dtype (1-d, strided, 0-d, requires_grad), each compared with transformers' own output.

These run on every Python the CI covers (3.10-3.13): the int fast path has one layout up to 3.11
and another from 3.12 on."""

from __future__ import annotations

import copy
import enum
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from transformers import DataCollatorWithPadding

import fastcollate
from tests.support.compare import assert_same_batch, assert_unchanged, has_object_array
from tests.support.hypothesis_profiles import examples

pytestmark = pytest.mark.parity

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# Digit and word boundaries of both int layouts (30-bit digits; one digit is "compact"), the
# small-int cache's edges (-5..256, immortal on 3.12+), and the int64 range's ends.
BOUNDARY_INTS = sorted(
    {
        v
        for base in (0, 1, 5, 6, 256, 257, 2**15, 2**30, 2**31, 2**32, 2**62)
        for v in (base - 1, base, base + 1, -base + 1, -base, -base - 1)
    }
    | {INT64_MAX, INT64_MAX - 1, INT64_MIN, INT64_MIN + 1}
)
TOO_BIG_INTS = [INT64_MAX + 1, INT64_MIN - 1, 2**64, -(2**64), 2**100, -(2**100)]

TENSOR_DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint16,
    torch.uint32,
    torch.uint64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
]
INT_DTYPES = [d for d in TENSOR_DTYPES if not d.is_floating_point and d != torch.bool]


class Colour(enum.IntEnum):
    RED = 1
    BLUE = 2**40


class MyInt(int):
    pass


def fresh(value: int) -> int:
    """An int object made at run time (not a constant shared by the compiled test)."""
    return int(str(value))


@pytest.fixture(scope="module")
def collators(bert_tokenizer):
    return (
        DataCollatorWithPadding(bert_tokenizer),
        fastcollate.DataCollatorWithPadding(bert_tokenizer),
    )


# Where torch has no DLPack exchange table (or FASTCOLLATE_DLPACK_EXCHANGE=0 turns it off, as
# test_routes_without_torchs_exchange_table does), a pad group of at most this many tensors is
# read tensor by tensor in place, one of more through one torch.cat
# (rust/py/convert/tensor_ints.rs, READ_IN_PLACE_UP_TO); with the table, every batch is read
# in place.
TENSORS_READ_IN_PLACE = 16


def both_tensor_read_paths(rows) -> list:
    """`rows`, and, when they hold torch tensors, the same rows repeated past
    `TENSORS_READ_IN_PLACE` rows (read through one torch.cat without the exchange table, in
    place with it): both must give transformers' result."""
    holds_tensors = isinstance(rows, list) and any(
        isinstance(value, torch.Tensor) for row in rows for value in row.values()
    )
    if not holds_tensors or len(rows) > TENSORS_READ_IN_PLACE:
        return [rows]
    return [rows, rows * (TENSORS_READ_IN_PLACE // len(rows) + 1)]


def assert_same_as_transformers(collators, rows, return_tensors="pt"):
    for batch in both_tensor_read_paths(rows):
        _assert_same_as_transformers(collators, batch, return_tensors)


def _assert_same_as_transformers(collators, rows, return_tensors):
    theirs, ours = collators
    theirs.return_tensors = ours.return_tensors = return_tensors
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # transformers: "creating a tensor from a list of ..."
            expected = theirs(rows)
        assert_same_batch(ours(rows), expected)
    finally:
        theirs.return_tensors = ours.return_tensors = "pt"


# ---------------------------------------------------------------------------------------------
# Python ints


@pytest.mark.parametrize("return_tensors", ["pt", "np"])
@pytest.mark.parametrize("value", BOUNDARY_INTS)
def test_boundary_ints_in_list_rows_and_labels(collators, value, return_tensors):
    v, neg = fresh(value), fresh(min(-value, INT64_MAX))
    rows = [
        {"input_ids": [101, v, neg, 102], "attention_mask": [1, 1, 1, 1], "label": v},
        {"input_ids": [v, 7], "attention_mask": [1, 1], "label": neg},
        {"input_ids": [v] * 3, "attention_mask": [1, 1, 1], "label": 0},
    ]
    assert_same_as_transformers(collators, rows, return_tensors)


@given(
    st.lists(
        st.lists(st.integers(INT64_MIN, INT64_MAX) | st.sampled_from(BOUNDARY_INTS), max_size=12),
        min_size=1,
        max_size=6,
    )
)
@settings(max_examples=examples(60), deadline=None)
def test_random_int64_rows(collators, sequences):
    rows = [{"input_ids": [101, *s], "label": s[0] if s else -1} for s in sequences]
    assert_same_as_transformers(collators, rows)


@pytest.mark.parametrize("value", TOO_BIG_INTS)
@pytest.mark.parametrize("where", ["first", "later"])
def test_ints_outside_int64_name_key_and_row(collators, value, where):
    ids = [101, 7, value] if where == "later" else [value, 7]
    rows = [{"input_ids": [101, 102]}, {"input_ids": ids}]
    before = [dict(r, input_ids=list(r["input_ids"])) for r in rows]
    with pytest.raises(ValueError, match=r"'input_ids' in row 1 .*position "):
        collators[1](rows)
    assert rows == before  # the caller's data is untouched


@pytest.mark.parametrize("value", TOO_BIG_INTS)
def test_label_outside_int64_names_key_and_row(collators, value):
    rows = [{"input_ids": [101], "label": 0}, {"input_ids": [101], "label": value}]
    with pytest.raises(ValueError, match=r"'label' in row 1"):
        collators[1](rows)


@pytest.mark.parametrize(
    "values",
    [
        [True, False, True],  # all bools, equal lengths: a bool tensor, as in transformers
        [True, 5, False],  # bools mixed into ints
        [MyInt(3), MyInt(-(2**40)), 4],  # int subclasses
        [Colour.RED, Colour.BLUE, 0],  # IntEnum members
        [5, np.int64(INT64_MAX), np.int32(-7), np.uint8(200)],  # numpy scalars after an int
        [7, 8, True],  # a bool after a run of ints
    ],
    ids=["bools", "bools-and-ints", "int-subclass", "intenum", "numpy-scalars", "trailing-bool"],
)
def test_bools_and_int_subclasses(collators, values):
    equal = [{"input_ids": list(values), "label": values[0]} for _ in range(2)]
    assert_same_as_transformers(collators, equal)
    ragged = [{"input_ids": list(values), "label": values[1]}, {"input_ids": [values[2]]}]
    ragged[1]["label"] = values[2]
    assert_same_as_transformers(collators, ragged)


# ---------------------------------------------------------------------------------------------
# torch tensors


def _sequence(dtype: torch.dtype, length: int, start: int = 1) -> torch.Tensor:
    values = torch.arange(start, start + length) % 2 if dtype == torch.bool else None
    if values is None:
        values = torch.arange(start, start + length)
    return values.to(dtype)


@pytest.mark.parametrize("dtype", TENSOR_DTYPES, ids=str)
def test_tensor_rows_of_every_dtype(collators, dtype):
    # Padded main input (ragged), an unpadded extra key (equal lengths) and a 0-d label.
    rows = [
        {
            "input_ids": _sequence(dtype, n),
            "scores": _sequence(dtype, 3, start=n),
            "label": _sequence(dtype, 1, start=n)[0],
        }
        for n in (3, 5, 1)
    ]
    assert rows[0]["label"].dim() == 0
    assert_same_as_transformers(collators, rows)
    assert_same_as_transformers(collators, rows, "np")


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=str)
def test_tensor_extreme_values(collators, dtype):
    info = torch.iinfo(dtype)
    low, high = info.min, min(info.max, INT64_MAX)
    rows = [
        {
            "input_ids": torch.tensor([low, high, 0], dtype=dtype),
            "label": torch.tensor(high).to(dtype),
        },
        {"input_ids": torch.tensor([high], dtype=dtype), "label": torch.tensor(low).to(dtype)},
    ]
    assert_same_as_transformers(collators, rows)


def test_uint64_tensor_values_above_int64_name_key_and_row(collators):
    rows = [
        {"input_ids": torch.tensor([1, 2], dtype=torch.uint64)},
        {"input_ids": torch.tensor([1, 2**63], dtype=torch.uint64)},
    ]
    with pytest.raises(ValueError, match=r"'input_ids' in row 1"):
        collators[1](rows)


def _strided_views(dtype: torch.dtype) -> dict[str, torch.Tensor]:
    base = _sequence(dtype, 40).reshape(8, 5)
    return {
        "every other": _sequence(dtype, 20)[::2],
        "a column": base[:, 2],
        "offset slice": _sequence(dtype, 20)[7:13],
        "transposed row": base.t()[1],
        "expanded": _sequence(dtype, 1).expand(6),
        "empty slice": _sequence(dtype, 10)[4:4],
    }


@pytest.mark.parametrize(
    "dtype", [torch.int64, torch.int32, torch.uint8, torch.float32, torch.bool], ids=str
)
def test_strided_and_offset_tensor_rows(collators, dtype):
    views = _strided_views(dtype)
    for name, view in views.items():
        # Each view in turn leads the batch (the first row decides the read path).
        lead = view if view.numel() else views["a column"]
        rows = [{"input_ids": lead}] + [{"input_ids": v} for n, v in views.items() if n != name]
        assert_same_as_transformers(collators, rows)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.int32], ids=str)
def test_negative_view_tensors_read_their_values(collators, dtype):
    # A lazily negated view keeps the un-negated data in memory: reading the buffer in place
    # would give the wrong sign.
    base = torch.arange(1, 7, dtype=dtype)
    rows = [{"input_ids": torch._neg_view(base)}, {"input_ids": torch._neg_view(base[:3])}]
    assert rows[0]["input_ids"].is_neg()
    assert_same_as_transformers(collators, rows)
    assert_same_as_transformers(collators, rows, "np")


@pytest.mark.parametrize("rows", [2, 40])
@pytest.mark.parametrize("where", [0, -1])
def test_one_negative_view_among_many_tensors_and_labels(collators, monkeypatch, rows, where):
    # Every tensor is asked for its negative bit through torch's C method, never through a
    # method patched onto torch.Tensor: one negated row or 0-d label anywhere in a batch of
    # any size (read tensor by tensor or concatenated) still reads negated.
    batch = [
        {"input_ids": torch.arange(1, 4 + i % 5), "label": torch.tensor(i)} for i in range(rows)
    ]
    batch[where] = {
        "input_ids": torch._neg_view(batch[where]["input_ids"]),
        "label": torch._neg_view(torch.tensor(7)),
    }
    assert_same_as_transformers(collators, batch)
    monkeypatch.setattr(torch.Tensor, "is_neg", lambda self: False)
    ours = collators[1](batch)
    assert ours["input_ids"][where].min() < 0
    assert ours["labels"][where] == -7


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16], ids=str)
@pytest.mark.parametrize("rows_before", [0, 1])
def test_misaligned_tensor_rows(collators, dtype, rows_before):
    # torch.frombuffer takes any byte offset: a tensor whose first value is not aligned for
    # its dtype cannot be read in place as a slice of that dtype.
    size = torch.empty(0, dtype=dtype).element_size()
    memory = bytearray(range(1, 8 * size + 2))
    odd = torch.frombuffer(memory, dtype=dtype, offset=1, count=5)
    assert odd.data_ptr() % size
    rows = [{"input_ids": torch.arange(3, dtype=dtype)} for _ in range(rows_before)]
    rows += [{"input_ids": odd}, {"input_ids": torch.arange(2, dtype=dtype)}]
    assert_same_as_transformers(collators, rows)
    assert_same_as_transformers(collators, rows, "np")


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("rows", [1, 2, 5, 6])
def test_small_torch_format_batches_of_every_size_around_the_read_switch(
    collators, bert_tokenizer, rows, side
):
    # Three keys a row: up to five rows are read tensor by tensor, six through one torch.cat.
    batch = [
        {
            "input_ids": torch.arange(100, 103 + 2 * i),
            "token_type_ids": torch.zeros(3 + 2 * i, dtype=torch.int64),
            "attention_mask": torch.ones(3 + 2 * i, dtype=torch.int64),
            "label": torch.tensor(i % 2),
        }
        for i in range(rows)
    ]
    bert_tokenizer.padding_side = side
    try:
        _assert_same_as_transformers(collators, batch, "pt")
    finally:
        bert_tokenizer.padding_side = "right"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16], ids=str)
def test_requires_grad_tensors(collators, dtype):
    rows = [
        {
            "input_ids": torch.tensor([101, 5, 102]),
            "scores": torch.rand(4, dtype=dtype, requires_grad=True),
            "label": torch.tensor(0.5, dtype=dtype, requires_grad=True),
        },
        {
            "input_ids": torch.tensor([101, 102]),
            "scores": torch.rand(4, dtype=dtype, requires_grad=True) * 2,  # a non-leaf
            "label": torch.tensor(1.5, dtype=dtype, requires_grad=True),
        },
    ]
    before = {k: v.detach().clone() for k, v in rows[1].items()}
    assert_same_as_transformers(collators, rows)
    for key, value in before.items():
        assert torch.equal(rows[1][key].detach(), value)


@pytest.mark.parametrize(
    "dtype",
    [
        pytest.param(
            d,
            marks=pytest.mark.xfail(
                strict=True,
                reason="transformers' own torch.tensor cannot build a uint64 label column",
            ),
        )
        if d == torch.uint64
        else d
        for d in TENSOR_DTYPES
    ],
    ids=str,
)
def test_zero_d_labels_with_list_rows(collators, dtype):
    # Lists for the sequences and 0-d tensors for the labels (a mixed dataset format).
    rows = [
        {"input_ids": [101, *range(n), 102], "label": _sequence(dtype, 1, start=n)[0]}
        for n in (0, 4, 2)
    ]
    assert_same_as_transformers(collators, rows)


@given(
    st.lists(st.integers(0, 12), min_size=1, max_size=8),
    st.sampled_from([torch.int64, torch.int32, torch.float32, torch.bool]),
    st.booleans(),
)
@settings(max_examples=examples(40), deadline=None)
def test_torch_format_rows(collators, lengths, label_dtype, strided):
    # Rows as `datasets`' set_format("torch") yields them: every value a tensor.
    rows = []
    for i, n in enumerate(lengths):
        ids = torch.arange(2 * n + 2)[::2] if strided else torch.arange(n + 1)
        rows.append(
            {
                "input_ids": ids + 100,
                "token_type_ids": torch.zeros_like(ids),
                "attention_mask": torch.ones_like(ids),
                "label": torch.tensor(i % 2).to(label_dtype),
            }
        )
    assert_same_as_transformers(collators, rows)


# ---------------------------------------------------------------------------------------------
# Padding in place (rust/py/convert/in_place.rs): the usual batch is read straight into the padded
# buffers; anything else makes it give up, at any row and key, and leave the group to the
# general path. Either way the result must be transformers'.

NUMPY_INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                    np.uint64]


def _row(ids, **extra):
    row = {"input_ids": ids, "token_type_ids": [0] * len(ids), "attention_mask": [1] * len(ids)}
    row.update(extra)
    return row


def _numpy_rows(dtype, lengths=(5, 2, 7)):
    return [
        {
            "input_ids": (np.arange(n) + 3).astype(dtype),
            "attention_mask": np.ones(n, dtype=dtype),
            "label": i,
        }
        for i, n in enumerate(lengths)
    ]


@pytest.mark.parametrize("return_tensors", ["pt", "np"])
@pytest.mark.parametrize("dtype", NUMPY_INT_DTYPES, ids=lambda d: d.__name__)
def test_numpy_rows_of_every_int_dtype(collators, dtype, return_tensors):
    assert_same_as_transformers(collators, _numpy_rows(dtype), return_tensors)


@pytest.mark.parametrize("return_tensors", ["pt", "np"])
@pytest.mark.parametrize("dtype", NUMPY_INT_DTYPES, ids=lambda d: d.__name__)
def test_numpy_rows_at_every_int_dtypes_ends_contiguous_or_strided(collators, dtype,
                                                                   return_tensors):
    # A contiguous row is read where it lies (copied whole for int64, widened value by value
    # for the others); a strided one is copied out first. Both must give transformers' values
    # at the ends of each dtype's range (uint64's end within int64's).
    info = np.iinfo(dtype)
    high = min(int(info.max), INT64_MAX)
    values = np.array([info.min, high, 0, 1, info.min + 1, high - 1, 7], dtype=dtype)
    strided = np.repeat(values, 2)[::2]
    assert not strided.flags.c_contiguous
    rows = [
        {"input_ids": values, "attention_mask": np.ones(7, dtype=dtype)},
        {"input_ids": strided[:4], "attention_mask": np.ones(4, dtype=dtype)},
        {"input_ids": values[2:], "attention_mask": np.ones(5, dtype=dtype)[::-1]},
        {"input_ids": values[:0], "attention_mask": np.ones(0, dtype=dtype)},
    ]
    assert_same_as_transformers(collators, rows, return_tensors)


def test_numpy_uint64_above_int64_names_key_and_row(collators):
    rows = _numpy_rows(np.uint64)
    rows[2]["input_ids"][4] = 2**63
    with pytest.raises(ValueError, match=r"'input_ids' in row 2"):
        collators[1](rows)


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda a: a[::2], id="strided"),
        pytest.param(lambda a: a[::-1], id="reversed"),
        pytest.param(lambda a: np.frombuffer(b"\0" + a.tobytes(), np.int64, offset=1),
                     id="unaligned"),
        pytest.param(lambda a: a.astype(np.longlong), id="longlong"),
        pytest.param(lambda a: np.broadcast_to(a[:1], a.shape), id="broadcast"),
        pytest.param(lambda a: a.astype(a.dtype.newbyteorder()), id="byte-swapped"),
        pytest.param(lambda a: a.view(np.recarray), id="subclass"),
        pytest.param(lambda a: a.astype(np.float32), id="float32"),
        pytest.param(lambda a: a.astype(np.bool_), id="bool"),
    ],
)
@pytest.mark.parametrize("where", [0, 2])
def test_unusual_numpy_rows_anywhere_in_the_batch(collators, make, where):
    rows = _numpy_rows(np.int64, lengths=(6, 3, 8))
    rows[where]["input_ids"] = make(np.arange(8) + 1)[: len(rows[where]["attention_mask"])]
    rows[where]["attention_mask"] = np.ones(len(rows[where]["input_ids"]), dtype=np.int64)
    try:
        assert_same_as_transformers(collators, rows)
    except ValueError as theirs_or_ours:
        # Both sides must fail then (float32 ids are not an error for either).
        with pytest.raises(type(theirs_or_ours)):
            collators[1](rows)


@pytest.mark.parametrize(
    "last_ids",
    [
        # (A float among listed ids is refused: tests/collators/test_values.py.)
        pytest.param([101, True, 102], id="bool"),
        pytest.param([101, MyInt(7), 102], id="int-subclass"),
        # The longest row: transformers cannot pad a tuple (it adds a list to it).
        pytest.param((101, 7, 8, 9, 102), id="tuple"),
        pytest.param([], id="empty"),
    ],
)
@pytest.mark.parametrize("side", ["right", "left"])
def test_a_different_last_row_pads_as_transformers(collators, bert_tokenizer, last_ids, side):
    rows = [_row([101, 5, 6, 102]), _row([101, 102]), _row(list(last_ids))]
    rows[2]["input_ids"] = last_ids
    bert_tokenizer.padding_side = side
    try:
        assert_same_as_transformers(collators, rows)
        assert_same_as_transformers(collators, rows, "np")
    finally:
        bert_tokenizer.padding_side = "right"


def test_follower_of_another_length_in_a_late_row_names_it(collators):
    rows = [_row([101, 5, 102]), _row([101, 102])]
    rows[1]["attention_mask"] = [1, 1, 1]
    with pytest.raises(ValueError, match=r"'attention_mask'.* row 1"):
        collators[1](rows)


def test_missing_key_in_a_late_row_names_it(collators):
    rows = [_row([101, 5, 102]), _row([101, 102]), {"input_ids": [101, 102]}]
    with pytest.raises(ValueError, match=r"row 2"):
        collators[1](rows)


def test_dict_subclass_and_tuple_batches(collators):
    class Row(dict):
        pass

    rows = [Row(_row([101, 5, 102])), Row(_row([101, 102]))]
    assert_same_as_transformers(collators, rows)
    assert_same_as_transformers(collators, tuple(_row([101, 7, 8, 102]) for _ in range(3)))


def test_attention_mask_created_when_rows_lack_it(collators):
    rows = [{"input_ids": [101, 5, 102]}, {"input_ids": [101, 102]}]
    assert_same_as_transformers(collators, rows)


@pytest.mark.parametrize("padding", ["max_length", "longest", False])
@pytest.mark.parametrize("pad_to_multiple_of", [None, 8])
def test_padding_options_in_place(bert_tokenizer, padding, pad_to_multiple_of):
    rows = [_row([101, 5, 6, 102]), _row([101, 102]), _row([101, 9, 102])]
    if padding is False:
        rows = [_row([101, 5, 102]) for _ in range(3)]
    kwargs = dict(padding=padding, max_length=12, pad_to_multiple_of=pad_to_multiple_of)
    theirs = DataCollatorWithPadding(bert_tokenizer, **kwargs)
    ours = fastcollate.DataCollatorWithPadding(bert_tokenizer, **kwargs)
    assert_same_as_transformers((theirs, ours), rows)


def test_numpy_label_beside_list_rows_keeps_its_dtype(collators):
    for label in (np.float64(0.25), np.int32(3)):
        rows = [_row([101, 5, 102], label=label), _row([101, 102], label=label)]
        assert_same_as_transformers(collators, rows)
        assert_same_as_transformers(collators, rows, "np")


@pytest.mark.parametrize("fmt", ["lists", "numpy", "torch"])
def test_rows_are_left_as_they_were(collators, fmt):
    rows = [_row([101, 5, 6, 102], label=1), _row([101, 102], label=0)]
    if fmt != "lists":
        convert = np.asarray if fmt == "numpy" else torch.tensor
        rows = [{k: convert(v) for k, v in r.items()} for r in rows]
    def snapshot(value):
        return value.numpy().copy() if isinstance(value, torch.Tensor) else np.array(value)

    before = [{k: snapshot(v) for k, v in r.items()} for r in rows]
    collators[1](rows)
    for row, was in zip(rows, before, strict=True):
        for key, value in row.items():
            assert np.array_equal(snapshot(value), was[key])


# ---------------------------------------------------------------------------------------------
# Tensor keys through one torch.cat (rust/py/convert/tensor_concat.rs): a key's tensors are
# concatenated without looking at each row's dtype (the result's dtype says whether every value
# came through exactly), the keys of a pad group share one cat, and 0-d labels are read with one
# tolist() each. Rows whose dtypes differ per key and per row must still give transformers'
# output, or an error where transformers has one.

MIXED_DTYPES = [
    torch.int64,
    torch.int32,
    torch.int8,
    torch.uint8,
    torch.uint64,
    torch.bool,
    torch.float16,
    torch.float32,
    torch.float64,
]


def _values(dtype: torch.dtype) -> st.SearchStrategy:
    if dtype == torch.bool:
        return st.booleans()
    if dtype.is_floating_point:
        # Exact in float16 as in float64: the dtypes then decide the result, not rounding.
        return st.sampled_from([0.0, 0.5, -1.5, 3.0, 2048.0])
    info = torch.iinfo(dtype)
    edges = [info.min, info.max, 0, 1]
    if dtype == torch.uint64:
        edges = [0, 1, 2**62]  # transformers reads values past int64 as an error
    elif dtype in (torch.int64, torch.int32):
        edges += [2**24 + 1]  # not a float32: a float row beside it must not round it
    return st.one_of(st.sampled_from(edges), st.integers(max(info.min, -100), min(info.max, 100)))


@st.composite
def _tensor(draw, length: int, dtypes=MIXED_DTYPES) -> torch.Tensor:
    dtype = draw(st.sampled_from(dtypes))
    values = draw(st.lists(_values(dtype), min_size=length, max_size=length))
    return torch.tensor(values, dtype=dtype)


@st.composite
def _mixed_dtype_rows(draw) -> list[dict]:
    rows = []
    for _ in range(draw(st.integers(1, 5))):
        length = draw(st.integers(0, 5))
        label = draw(_tensor(1, [torch.int64, torch.int32, torch.bool, torch.float32]))
        rows.append(
            {
                "input_ids": draw(_tensor(length)),
                "token_type_ids": draw(_tensor(length)),
                "attention_mask": draw(_tensor(length)),
                "scores": draw(_tensor(3)),  # not padded: a key read on its own
                # Mostly 0-d, now and then a one-element row (which item() would also take).
                "label": label if draw(st.integers(0, 7)) == 0 else label[0],
            }
        )
    return rows


def assert_same_as_transformers_or_both_raise(collators, rows, return_tensors):
    for batch in both_tensor_read_paths(rows):
        _same_as_transformers_or_both_raise(collators, batch, return_tensors)


def _same_as_transformers_or_both_raise(collators, rows, return_tensors):
    theirs, ours = collators
    theirs.return_tensors = return_tensors
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = theirs(rows)
    except Exception:  # noqa: BLE001 - any failure of theirs must be a clear error of ours
        expected = None
    finally:
        theirs.return_tensors = "pt"
    if expected is None or has_object_array(expected):  # e.g. a None label with "np"
        ours.return_tensors = return_tensors
        try:
            with pytest.raises((ValueError, TypeError)):
                ours(rows)
        finally:
            ours.return_tensors = "pt"
    else:
        _assert_same_as_transformers(collators, rows, return_tensors)


@given(_mixed_dtype_rows(), st.sampled_from(["pt", "np"]))
@settings(max_examples=examples(150), deadline=None)
def test_tensor_rows_of_mixed_dtypes(collators, rows, return_tensors):
    assert_same_as_transformers_or_both_raise(collators, rows, return_tensors)


@pytest.mark.parametrize(
    "dtypes",
    [
        # (input_ids, token_type_ids, attention_mask) in every row; the last two make the
        # group's keys go through one cat, the others each key on its own.
        (torch.int64, torch.int64, torch.bool),  # a mask of bools stays bool when unpadded
        (torch.int32, torch.int8, torch.uint8),  # promoted to int16/int32: values kept
        (torch.int64, torch.float32, torch.int64),  # a float key: not one cat
        (torch.uint64, torch.int64, torch.int64),  # torch cannot promote uint64 with int64
        (torch.int64, torch.int64, torch.int64),
        (torch.int16, torch.int16, torch.int16),
    ],
    ids=str,
)
@pytest.mark.parametrize("lengths", [(3, 3), (2, 4)], ids=["equal", "ragged"])
@pytest.mark.parametrize("return_tensors", ["pt", "np"])
def test_pad_group_keys_of_different_dtypes(collators, dtypes, lengths, return_tensors):
    keys = ("input_ids", "token_type_ids", "attention_mask")
    rows = [
        {key: _sequence(dtype, n, start=2 + i) for key, dtype in zip(keys, dtypes, strict=True)}
        | {"label": torch.tensor(i)}
        for i, n in enumerate(lengths)
    ]
    assert_same_as_transformers(collators, rows, return_tensors)


@pytest.mark.parametrize(
    "odd_label",
    [
        torch.tensor([7]),  # one element, 1-d
        torch.nn.Parameter(torch.tensor(7.0)),  # a subclass
        torch.tensor(2**63, dtype=torch.uint64),  # past int64
        torch.tensor(1 + 2j),  # complex
    ],
    ids=["1-d", "subclass", "uint64", "complex"],
)
@pytest.mark.parametrize("where", [0, 2])
def test_odd_zero_d_label_anywhere_in_the_batch(collators, odd_label, where):
    rows = [
        {"input_ids": torch.tensor([101, 5 + i, 102]), "label": torch.tensor(i)} for i in range(3)
    ]
    rows[where]["label"] = odd_label
    assert_same_as_transformers_or_both_raise(collators, rows, "pt")


@pytest.mark.parametrize(
    "odd_row",
    [
        torch.tensor(9),  # 0-d: len() raises
        torch.tensor([[9, 8, 7]]),  # 2-d, one row: len() is 1, three values
        torch.tensor([[9], [8]]),  # 2-d, one column
        torch.zeros(0, dtype=torch.int64),  # empty 1-d: torch.cat skips it
        torch.zeros((0, 3), dtype=torch.int64),  # empty 2-d: len() 0, not skipped
    ],
    ids=["0-d", "1x3", "2x1", "empty", "0x3"],
)
@pytest.mark.parametrize("key", ["input_ids", "token_type_ids", "attention_mask"])
@pytest.mark.parametrize("where", [0, 1, 2, "every row"])
def test_odd_rank_tensor_in_a_padded_key(collators, odd_row, key, where):
    # Row lengths of 1-d tensors are read with len() (torch's C slot): a row of another rank
    # anywhere in any key of the group must still give transformers' result or a clear error.
    rows = [
        {
            "input_ids": torch.tensor([101, 5 + i, 102][: 2 + i % 2]),
            "token_type_ids": torch.zeros(2 + i % 2, dtype=torch.int64),
            "attention_mask": torch.ones(2 + i % 2, dtype=torch.int64),
            "label": torch.tensor(i),
        }
        for i in range(3)
    ]
    for row in rows if where == "every row" else [rows[where]]:
        row[key] = odd_row.clone()
    assert_same_as_transformers_or_both_raise(collators, rows, "pt")
    # Nothing is left behind: the next batch of ordinary rows collates as before.
    for row in rows:
        row[key] = torch.ones(2, dtype=torch.int64)
    assert_same_as_transformers_or_both_raise(collators, rows, "pt")


class Name(str):
    """A str subclass as a feature name (rows looked up with it must find the same values)."""


@pytest.mark.parametrize("fmt", ["lists", "numpy", "torch"])
@pytest.mark.parametrize("names", ["shared", "distinct objects", "str subclass"])
def test_rows_keyed_by_any_string_objects(collators, fmt, names):
    # Keys are looked up with the first row's own key objects when they are exact strs; rows
    # whose equal keys are other objects, or str subclasses, must read the same.
    def key(name: str, row: int) -> str:
        if names == "distinct objects":
            return "".join([name[:1], name[1:]]) + "" * row  # a new object per row
        if names == "str subclass" and row == 0:
            return Name(name)
        return name

    convert = {"lists": list, "numpy": np.asarray, "torch": torch.tensor}[fmt]
    plain = [_row([101, 5 + i, 102][: 3 - i], label=i) for i in range(3)]
    rows = [{key(k, i): convert(v) if k != "label" else v for k, v in r.items()}
            for i, r in enumerate(plain)]
    if names == "distinct objects":
        assert rows[0].keys().__iter__().__next__() is not next(iter(rows[1].keys()))
    assert_same_as_transformers(collators, rows)
    theirs, ours = collators
    assert [type(k) for k in ours(rows)] == [type(k) for k in theirs(rows)]


def test_mapping_of_lists_keyed_by_a_str_subclass(bert_tokenizer):
    batch = {Name("input_ids"): [[101, 5, 102], [101, 102]], "label": [0, 1]}
    expected = bert_tokenizer.pad(batch, return_tensors="pt")
    ours = fastcollate.pad(batch, bert_tokenizer, return_tensors="pt")
    assert_same_batch(ours, expected)
    assert [type(k) for k in ours] == [type(k) for k in expected]


# A label of any kind in any row, beside token ids the in-place pad path takes (lists, numpy,
# tensors): Python ints are read straight from the rows there, anything else by the general
# path, which must give the same batch (or raise where transformers cannot build one).
_ODD_LABELS = st.sampled_from(
    [True, False, MyInt(3), Colour.BLUE, np.int64(-4), np.uint8(200), 2.5, INT64_MAX + 1,
     INT64_MIN - 1, torch.tensor(6), "text", None, [1, 2]]
)


@given(
    st.sampled_from(["lists", "numpy", "torch"]),
    st.lists(st.integers(1, 5), min_size=1, max_size=6),
    st.lists(st.integers(INT64_MIN, INT64_MAX) | st.sampled_from(BOUNDARY_INTS), min_size=6,
             max_size=6),
    st.dictionaries(st.integers(0, 5), _ODD_LABELS, max_size=3),
    st.sampled_from(["pt", "np"]),
)
@example("lists", [1], [0] * 6, {0: None}, "np")  # transformers: an object array
@example("lists", [3, 2, 1], [0, -4611686018427387903, 0, 0, 0, 0],
         {0: 2.5, 2: INT64_MAX + 1}, "pt")  # a float, then an int past int64: float labels
@example("numpy", [2, 3], [0] * 6, {0: torch.tensor(6), 1: INT64_MAX + 1},
         "np")  # transformers reads the tensor as an int: a column of ints alone
@example("torch", [1, 2, 3], [0] * 6, {0: torch.tensor(6), 1: np.uint8(200), 2: INT64_MAX + 1},
         "np")  # beside a numpy uint8: float64, as transformers
@settings(max_examples=examples(80), deadline=None)
def test_labels_of_any_kind_beside_padded_rows(collators, fmt, lengths, labels, odd,
                                               return_tensors):
    convert = {"lists": list, "numpy": np.asarray, "torch": torch.tensor}[fmt]
    rows = [
        {"input_ids": convert([101 + i] * n), "attention_mask": convert([1] * n),
         "label": odd.get(i, fresh(labels[i]))}
        for i, n in enumerate(lengths)
    ]
    labels = [row["label"] for row in rows]

    def an_int(label: object) -> bool:
        # Ints, bools and np.int64s are read as numbers; with array or tensor token ids so is
        # a 0-d integer tensor, which transformers makes a Python int there (`to_py_obj`).
        if isinstance(label, torch.Tensor):
            return fmt != "lists" and label.ndim == 0 and not label.is_floating_point()
        return isinstance(label, (int, np.int64))

    if all(map(an_int, labels)) and any(not INT64_MIN <= int(label) <= INT64_MAX
                                        for label in labels):
        # A documented difference (docs/differences.md, "Bad values"): where numpy makes a
        # uint64, float64 or object column of such labels (ints, bools and np.int64s, which
        # are read as numbers), fastcollate raises, naming key and row.
        with pytest.raises(ValueError, match=r"'label' in row \d"):
            collators[1](rows)
        return
    # Twice: the second call is served by the collator's call plan.
    for _ in range(2):
        assert_same_as_transformers_or_both_raise(collators, rows, return_tensors)


# ---------------------------------------------------------------------------------------------
# Ints beyond int64 beside a float: torch.tensor and np.asarray infer a float dtype from the whole
# list and take such an int as its (correctly rounded) float; only a column of ints alone keeps
# the documented error (docs/differences.md, "Bad values").

# Beyond int64 but within float64 (and, for the first four, within uint64: np.asarray makes a
# float64 array of them beside a float, an object array of the others).
BEYOND_INT64 = [INT64_MAX + 1, 2**64 - 1, np.uint64(2**63), np.uint64(2**64 - 1), INT64_MIN - 1,
                2**64, -(2**64) - 3, 2**100 + 2**76 + 1, 2**1023]
_FITS_UINT64 = 4


def _beyond(index: int):
    value = BEYOND_INT64[index]
    return value if isinstance(value, np.generic) else fresh(value)


def _theirs_or_error(fn):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            batch = fn()
    except Exception as err:  # noqa: BLE001 - compared with ours below
        return err
    return None if has_object_array(batch) else batch


def _same_or_both_raise(ours_fn, theirs_fn, key):
    """Ours equals transformers' batch; where transformers raises or makes an object array (a
    documented difference), ours raises a ValueError naming the key and a row."""
    expected = _theirs_or_error(theirs_fn)
    if expected is None or isinstance(expected, Exception):
        with pytest.raises(ValueError, match=rf"'{key}' in row \d+"):
            ours_fn()
        return expected
    assert_same_batch(ours_fn(), expected)
    return expected


@pytest.mark.parametrize("return_tensors", ["pt", "np"])
@pytest.mark.parametrize("float_first", [True, False], ids=["float-first", "float-after"])
@pytest.mark.parametrize("index", range(len(BEYOND_INT64)), ids=lambda i: repr(BEYOND_INT64[i]))
def test_label_beyond_int64_beside_a_float(collators, index, float_first, return_tensors):
    labels = [2.5, -4611686018427387903, _beyond(index)]
    if not float_first:
        labels.reverse()
    rows = [{"input_ids": [101, 7, 102][: 3 - i], "label": label}
            for i, label in enumerate(labels)]
    before = copy.deepcopy(rows)
    theirs, ours = collators
    theirs.return_tensors = ours.return_tensors = return_tensors
    try:
        # Twice: the second call is served by the collator's call plan.
        for _ in range(2):
            expected = _same_or_both_raise(lambda: ours(rows), lambda: theirs(rows), "label")
    finally:
        theirs.return_tensors = ours.return_tensors = "pt"
    # torch takes every such int as a float (but refuses a list whose first value is a numpy
    # uint64 beside Python ints); numpy those within uint64.
    uint64_first = isinstance(labels[0], np.uint64)
    if (return_tensors == "pt" and not uint64_first) or (
            return_tensors == "np" and index < _FITS_UINT64):
        assert expected is not None and not isinstance(expected, Exception)
        assert expected["labels"].dtype in (torch.float32, np.float64)
    assert_unchanged(rows, before)


_SEQUENCE_LABELS = [
    [[2.5, INT64_MAX + 1], [1, 2]],  # a float, then the big int in its row
    [[INT64_MAX + 1, 3, 2.5], [1, 2, 3]],  # the big int first in a row of ints
    [[1, INT64_MAX + 1, 3], [1, 2.5, 3]],  # the big int in a row before the float's
    [(1, 2**64 - 1, 3), (1, 2.5, 3)],  # tuple rows
    [[2.5, INT64_MIN - 1], [1, 2]],  # beyond uint64 too: numpy makes an object array
    [[1, 2**80], [2.5, 1]],
]
# A numpy uint64 scalar in a list row beside Python ints: torch refuses to promote it (even a
# small one; fastcollate reads numpy scalars in list rows as numbers), numpy makes float64.
_NP_UINT64_IN_A_ROW = [[1, np.uint64(2**63), 3], [1, 2.5, 3]]


@pytest.mark.parametrize(
    ("labels", "return_tensors"),
    [(labels, rt) for labels in _SEQUENCE_LABELS for rt in ("pt", "np")]
    + [(_NP_UINT64_IN_A_ROW, "np")],
)
def test_sequence_rows_with_an_int_beyond_int64_beside_a_float(collators, bert_tokenizer,
                                                               labels, return_tensors):
    def make():
        return [{"input_ids": [101, 7, 102][: 3 - i], "labels": label}
                for i, label in enumerate(labels)]

    rows = make()
    before = copy.deepcopy(rows)
    theirs, ours = collators
    theirs.return_tensors = ours.return_tensors = return_tensors
    try:
        for _ in range(2):
            _same_or_both_raise(lambda: ours(rows), lambda: theirs(make()), "labels")
    finally:
        theirs.return_tensors = ours.return_tensors = "pt"
    _same_or_both_raise(
        lambda: fastcollate.pad(rows, bert_tokenizer, return_tensors=return_tensors),
        lambda: bert_tokenizer.pad(make(), return_tensors=return_tensors),
        "labels",
    )
    assert_unchanged(rows, before)


@pytest.mark.parametrize("return_tensors", ["pt", "np"])
@pytest.mark.parametrize(
    "labels",
    [
        [2.5, INT64_MAX + 1, -4611686018427387903],  # a float first: float32 labels
        [2.5, np.uint64(2**64 - 1)],
        [2.5, 2**100],
        [INT64_MAX + 1, 2.5],  # an int first: int64 labels, which cannot hold it (both raise)
        [[2.5, INT64_MAX + 1], [1, 2]],  # label lists
        [[INT64_MAX + 1, 2.5], [1, 2]],
    ],
    ids=["float-first", "np-uint64", "2**100", "int-first", "lists", "lists-big-first"],
)
def test_default_data_collator_labels_beyond_int64_beside_a_float(labels, return_tensors):
    from transformers import default_data_collator

    def make():
        return [{"input_ids": [101, 7], "label": label} for label in labels]

    rows = make()
    before = copy.deepcopy(rows)
    _same_or_both_raise(
        lambda: fastcollate.default_data_collator(rows, return_tensors=return_tensors),
        lambda: default_data_collator(make(), return_tensors=return_tensors),
        "label",
    )
    assert_unchanged(rows, before)


@pytest.mark.parametrize("return_tensors", ["pt", "np"])
@pytest.mark.parametrize(
    "collator", ["DataCollatorWithPadding", "DataCollatorForTokenClassification",
                 "DataCollatorForSeq2Seq"],
)
@pytest.mark.parametrize(
    "labels",
    [
        [np.array([INT64_MAX + 1, 1], dtype=np.uint64), [2.5, 1]],  # a uint64 array row
        [[2.5, 1], np.array([2**64 - 1, 1], dtype=np.uint64)],
        [[2.5, INT64_MAX + 1], [1, 2]],
    ],
    ids=["uint64-array-first", "uint64-array-after", "list"],
)
def test_padding_collators_labels_beyond_int64_beside_a_float(bert_tokenizer, collator, labels,
                                                              return_tensors):
    # DataCollatorWithPadding keeps the float column; the token-classification and seq2seq
    # collators make int64 labels, which cannot hold the int (both raise).
    def make():
        return [{"input_ids": [101, 7, 102][: 3 - i], "labels": np.copy(label)
                 if isinstance(label, np.ndarray) else list(label)}
                for i, label in enumerate(labels)]

    import transformers

    theirs = getattr(transformers, collator)(bert_tokenizer, return_tensors=return_tensors)
    ours = getattr(fastcollate, collator)(bert_tokenizer, return_tensors=return_tensors)
    rows = make()
    if collator == "DataCollatorForSeq2Seq" and return_tensors == "np" and isinstance(
            labels[0], np.ndarray):
        # transformers' np.array(..., dtype=np.int64) wraps the uint64 row's values around; a
        # documented difference (docs/differences.md, "Bad values": uint64 arrays raise).
        with pytest.raises(ValueError, match=r"'labels' in row 0 holds an integer at position 0"):
            ours(rows)
        return
    for _ in range(2):
        _same_or_both_raise(lambda: ours(rows), lambda: theirs(make()), "labels")


@pytest.mark.parametrize("return_tensors", ["pt", "np"])
@pytest.mark.parametrize("value", [10**400, -(10**400)], ids=["above", "below"])
def test_label_beyond_float64_beside_a_float_raises(collators, value, return_tensors):
    # torch cannot make a float of it (it raises) and numpy makes an object array.
    rows = [{"input_ids": [101], "label": 2.5}, {"input_ids": [101, 7], "label": value}]
    theirs, ours = collators
    theirs.return_tensors = ours.return_tensors = return_tensors
    try:
        assert _theirs_or_error(lambda: theirs(rows)) is None or isinstance(
            _theirs_or_error(lambda: theirs(rows)), Exception)
        with pytest.raises(ValueError, match=r"'label' in row 1 holds an integer at position 0"):
            ours(rows)
    finally:
        theirs.return_tensors = ours.return_tensors = "pt"


@pytest.mark.parametrize("fmt", [np.asarray, torch.tensor])
@pytest.mark.parametrize(
    ("label", "return_tensors"),
    [(np.uint8(200), "pt"), (np.uint8(200), "np"), (np.int32(-3), "pt"), (np.int32(-3), "np"),
     (np.float32(2.5), "np"), (np.float64(2.5), "pt"), (np.float16(1.5), "pt"),
     (np.float16(1.5), "np"), (np.uint16(7), "pt"), (np.uint32(7), "np"), (np.int8(-8), "pt"),
     (np.bool_(True), "pt"), (np.bool_(False), "np"), (np.int64(-3), "pt")],
    ids=repr,
)
def test_numpy_scalar_labels_keep_their_dtype_beside_array_rows(collators, fmt, label,
                                                                return_tensors):
    # transformers hands a key of numbers alone to torch.tensor / np.asarray as it is, so the
    # numpy scalars' dtype is kept; twice: the second call is served by the call plan.
    rows = [{"input_ids": fmt([101, 7][: 2 - i]), "label": label} for i in range(2)]
    for _ in range(2):
        assert_same_as_transformers(collators, rows, return_tensors)
    theirs, ours = collators
    ours.return_tensors = return_tensors
    try:
        assert ours(rows)["labels"].dtype == (
            torch.from_numpy(np.asarray([label])).dtype if return_tensors == "pt"
            else np.asarray([label]).dtype
        )
    finally:
        ours.return_tensors = "pt"


@pytest.mark.parametrize("fmt", ["lists", "numpy", "torch", "torch-format"])
@pytest.mark.parametrize(
    "label_keys",
    [(), ("label",), ("label_ids",), ("labels",), ("label", "label_ids"), ("label_ids", "label"),
     ("labels", "label"), ("label", "labels", "label_ids")],
    ids=str,
)
@pytest.mark.parametrize("return_tensors", ["pt", "np"])
def test_label_names_renamed_as_transformers_renames_them(collators, fmt, label_keys,
                                                          return_tensors):
    # A planned call finishes a batch of arrays / tensors natively: `label` then `label_ids`
    # renamed to `labels` (key order included), in a BatchEncoding.
    def convert(value):
        if fmt == "torch-format" or (fmt == "torch" and isinstance(value, list)):
            return torch.tensor(value)
        return np.asarray(value) if fmt == "numpy" and isinstance(value, list) else value

    rows = [
        {"input_ids": convert([101, 5 + i, 102][: 3 - i]),
         **{key: convert(10 * n + i) for n, key in enumerate(label_keys)}}
        for i in range(3)
    ]
    for _ in range(3):  # the second and third calls are planned
        assert_same_as_transformers(collators, rows, return_tensors)


# ---------------------------------------------------------------------------------------------
# Every key of a row read in place: cached small ints (known by their address), other ints,
# bools and int subclasses, in masks and token type ids as well as token ids

MASK_VALUES = [-6, -5, -1, 0, 1, 2, 255, 256, 257, 2**30, -(2**30), INT64_MIN, INT64_MAX]
ODD_MASK_VALUES = [True, False, MyInt(1), MyInt(0), Colour.RED]


@pytest.mark.parametrize("return_tensors", ["pt", "np"])
@given(
    st.lists(
        st.tuples(
            st.lists(st.integers(-(2**40), 2**40) | st.sampled_from(MASK_VALUES), min_size=1,
                     max_size=9),
            st.integers(0, 3),
        ),
        min_size=1,
        max_size=5,
    ),
    st.sampled_from(["list", "tuple"]),
)
@settings(max_examples=examples(40), deadline=None)
def test_every_key_of_small_and_big_ints(collators, return_tensors, rows_spec, container):
    wrap = list if container == "list" else tuple
    if container == "tuple":
        # transformers cannot pad tuples (it adds a list to them): rows of one length.
        shortest = min(len(ids) for ids, _ in rows_spec)
        rows_spec = [(ids[:shortest], shift) for ids, shift in rows_spec]
    rows = []
    for ids, shift in rows_spec:
        # Small ints (mostly the cached objects) in the mask and token type ids, others too.
        mask = [fresh(v) for v in ids[shift:] + ids[:shift]]
        types = [fresh(-v if v % 2 else v % 300 - 5) for v in ids]
        rows.append({
            "input_ids": wrap(fresh(v) for v in ids),
            "token_type_ids": wrap(types),
            "attention_mask": wrap(mask),
            "label": fresh(ids[0]),
        })
    assert_same_as_transformers(collators, rows, return_tensors)


@pytest.mark.parametrize("odd", ODD_MASK_VALUES, ids=repr)
@pytest.mark.parametrize("key", ["attention_mask", "token_type_ids"])
@pytest.mark.parametrize("row", [0, 1])
def test_a_bool_or_int_subclass_in_a_mask_reads_as_transformers(collators, odd, key, row):
    rows = [
        {"input_ids": [101, 7, 102], "token_type_ids": [0, 0, 0], "attention_mask": [1, 1, 1]},
        {"input_ids": [101, 102], "token_type_ids": [0, 1], "attention_mask": [1, 1]},
    ]
    rows[row][key][1] = odd
    assert_same_as_transformers(collators, rows)
    assert_same_as_transformers(collators, rows, "np")


@pytest.mark.parametrize("where", [0, 1])
def test_tensor_rows_off_the_cpu(collators, where):
    # A meta tensor has a shape but no values (as a device's tensor has no host memory): it is
    # never read in place.
    rows = [{"input_ids": torch.tensor([101, 5 + i, 102])} for i in range(2)]
    rows[where]["input_ids"] = torch.empty(3, dtype=torch.int64, device="meta")
    assert_same_as_transformers_or_both_raise(collators, rows, "pt")


# Re-runs two whole files: with the slow tests (and under the profile this run has).
@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.skipif(
    os.environ.get("FASTCOLLATE_DLPACK_EXCHANGE") == "0", reason="this is the run it starts"
)
def test_routes_without_torchs_exchange_table(request):
    # torch 2.10 and later publish a DLPack exchange table, through which tensors are read and
    # made in one C call each; an older torch gets the routes below it (attribute calls and
    # torch.cat to read, numpy arrays and torch.from_numpy to make). They are run here by
    # turning the table off: this file's and the zero-copy tests, all against transformers.
    here = os.path.dirname(os.path.abspath(__file__))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
         f"--hypothesis-profile={request.config.getoption('hypothesis_profile') or 'default'}",
         os.path.join(here, "test_read_paths.py"), os.path.join(here, "test_zero_copy.py")],
        env={**os.environ, "FASTCOLLATE_DLPACK_EXCHANGE": "0"},
        capture_output=True, text=True, timeout=900,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert " passed" in result.stdout
