"""Keys that are not padded, holding numpy scalars (of every dtype, mixed with each other, with
Python numbers, 0-d arrays and 0-d tensors), beside token ids as lists, numpy arrays or torch
tensors, at every entry point that pads as `tokenizer.pad` does: transformers keeps a key of
numbers alone as it is for `torch.tensor` / `np.asarray` (so numpy scalars keep their dtype),
and turns a key holding anything else into Python values first. Each call is compared with
transformers' own; where transformers raises (or builds an object array), fastcollate raises a
ValueError naming the key and the row."""

from __future__ import annotations

import copy
import re
import warnings

import numpy as np
import pytest
import torch
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from transformers import (
    DataCollatorForLanguageModeling,
    DataCollatorForSeq2Seq,
    DataCollatorForTokenClassification,
    DataCollatorWithPadding,
)

import fastcollate
from tests.support.compare import assert_same_batch, assert_unchanged, has_object_array
from tests.support.hypothesis_profiles import examples
from tests.support.repository import ROOT

pytestmark = pytest.mark.parity

SCALAR_DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                 np.uint32, np.uint64, np.float16, np.float32, np.float64]


def _number(dtype, draw):
    if dtype is np.bool_:
        return draw(st.booleans())
    if np.dtype(dtype).kind == "f":
        return draw(st.sampled_from([0.0, 0.5, -2.25, 3.0, 1000.0]))
    info = np.iinfo(dtype)
    return draw(st.integers(int(info.min), int(info.max)) | st.sampled_from([0, 1, int(info.max)]))


@st.composite
def scalar(draw, dtype=None):
    """A numpy scalar (mostly), else a Python number, a 0-d array or a 0-d tensor."""
    kind = draw(st.sampled_from(["numpy"] * 6 + ["python", "0-d array", "0-d tensor"]))
    if kind == "python":
        return draw(st.sampled_from([3, -2, 0, True, False, 2.5]))
    dtype = dtype or draw(st.sampled_from(SCALAR_DTYPES))
    value = dtype(_number(dtype, draw))
    if kind == "0-d array":
        return np.asarray(value)
    if kind == "0-d tensor":
        return torch.from_numpy(np.asarray(value))
    return value


@st.composite
def column(draw, size):
    """One key's values: one dtype in every row (mostly), or a mixture."""
    if draw(st.booleans()):
        dtype = draw(st.sampled_from(SCALAR_DTYPES))
        return [dtype(_number(dtype, draw)) for _ in range(size)]
    return [draw(scalar()) for _ in range(size)]


def _token_ids(fmt, values):
    if fmt == "lists":
        return list(values)
    return np.asarray(values) if fmt == "numpy" else torch.tensor(values)


@st.composite
def batch(draw):
    fmt = draw(st.sampled_from(["numpy", "torch", "lists"]))
    lengths = draw(st.lists(st.integers(1, 4), min_size=1, max_size=5))
    values = draw(column(len(lengths)))
    with_mask = draw(st.booleans())
    rows = []
    for i, length in enumerate(lengths):
        row = {"input_ids": _token_ids(fmt, [101 + i] * length)}
        if with_mask:
            row["attention_mask"] = _token_ids(fmt, [1] * length)
        rows.append(row)
    return fmt, rows, values


def zero_d_array_first_beside_lists(fmt, values, return_tensors):
    """A documented difference (docs/differences.md): with Python-list token ids, transformers'
    "np" conversion takes `len()` of a key whose first value is an array, which fails for a
    0-d array; fastcollate stacks such values as np.asarray does."""
    return (fmt == "lists" and return_tensors == "np" and isinstance(values[0], np.ndarray)
            and values[0].ndim == 0)


def beyond_int64(values):
    """Whether a 0-d array or tensor holds an integer past int64: where such a key is read as
    numbers (no numpy scalar of another dtype beside it), fastcollate raises, naming key and
    row, as docs/differences.md ("Bad values") says; transformers may make a uint64 array."""
    return any(
        isinstance(value, (np.ndarray, torch.Tensor)) and str(value.dtype).endswith("uint64")
        and int(np.asarray(value)) > 2**63 - 1  # (torch's int() of such a tensor fails)
        for value in values
    )


def call_both(ours_fn, theirs_fn, rows, key, values=()):
    """transformers on a copy of the rows; fastcollate's result the same, or, where
    transformers fails or makes an object array, a ValueError / TypeError naming the key and a
    row. The rows are left as they were."""
    before = copy.deepcopy(rows)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = theirs_fn(copy.deepcopy(rows))
        failed = has_object_array(expected)
    except (ValueError, TypeError, RuntimeError):
        failed = True
    if failed:
        with pytest.raises((ValueError, TypeError)) as raised:
            ours_fn(rows)
        message = str(raised.value)
        assert f"'{key}'" in message and re.search(r"row \d", message), message
    elif beyond_int64(values):
        try:
            ours = ours_fn(rows)
        except ValueError as err:
            assert f"'{key}' in row" in str(err) and "does not fit in int64" in str(err)
        else:
            assert_same_batch(ours, expected)
    else:
        assert_same_batch(ours_fn(rows), expected)
    assert_unchanged(rows, before)


@pytest.fixture(scope="module")
def padding_collators(bert_tokenizer):
    return {
        rt: (DataCollatorWithPadding(bert_tokenizer, return_tensors=rt),
             fastcollate.DataCollatorWithPadding(bert_tokenizer, return_tensors=rt))
        for rt in ("pt", "np")
    }


@given(batch(), st.sampled_from(["label", "label_ids", "score"]), st.sampled_from(["pt", "np"]))
@example(("numpy", [{"input_ids": np.asarray([101])}] * 2, [np.bool_(True), np.uint8(3)]),
         "label", "pt")  # torch cannot take np.bool_ beside ints
@example(("torch", [{"input_ids": torch.tensor([101])}] * 2,
          [np.uint64(2**63), np.uint64(1)]), "label", "pt")  # nor a uint64 past int64
@example(("numpy", [{"input_ids": np.asarray([101])}] * 2,
          [np.asarray(np.uint8(3)), np.uint8(200)]), "label", "pt")  # Python ints then
@example(("torch", [{"input_ids": torch.tensor([101])}] * 2,
          [torch.tensor(2.5, dtype=torch.float64), np.float64(2.5)]), "score", "pt")
@settings(max_examples=examples(150), deadline=None)
def test_data_collator_with_padding(padding_collators, case, key, return_tensors):
    fmt, rows, values = case
    assume(not zero_d_array_first_beside_lists(fmt, values, return_tensors))
    rows = [{**row, key: value} for row, value in zip(rows, values, strict=True)]
    theirs, ours = padding_collators[return_tensors]
    for _ in range(2):  # the second call is served by the collator's call plan
        call_both(ours, theirs, rows, key, values)


@given(batch(), st.sampled_from(["pt", "np", None]), st.booleans())
@settings(max_examples=examples(100), deadline=None)
def test_pad(bert_tokenizer, case, return_tensors, as_mapping):
    fmt, rows, values = case
    assume(not zero_d_array_first_beside_lists(fmt, values, return_tensors))
    rows = [{**row, "score": value} for row, value in zip(rows, values, strict=True)]

    def columns(batch_rows):
        if not as_mapping:
            return batch_rows
        return {key: [row[key] for row in batch_rows] for key in batch_rows[0]}

    call_both(
        lambda r: fastcollate.pad(columns(r), bert_tokenizer, return_tensors=return_tensors),
        lambda r: bert_tokenizer.pad(columns(r), return_tensors=return_tensors),
        rows,
        "score",
        values,
    )


@given(batch(), st.sampled_from(["token classification", "seq2seq", "language modeling"]),
       st.sampled_from(["pt", "np"]))
@settings(max_examples=examples(100), deadline=None)
def test_collators_that_pad_with_the_tokenizer(bert_tokenizer, case, name, return_tensors):
    fmt, rows, values = case
    assume(not zero_d_array_first_beside_lists(fmt, values, return_tensors))
    rows = [{**row, "score": value} for row, value in zip(rows, values, strict=True)]
    if name != "language modeling":
        for i, row in enumerate(rows):
            row["labels"] = _token_ids(fmt, [i] * len(row["input_ids"]))
    classes = {
        "token classification": (fastcollate.DataCollatorForTokenClassification,
                                 DataCollatorForTokenClassification, {}),
        "seq2seq": (fastcollate.DataCollatorForSeq2Seq, DataCollatorForSeq2Seq, {}),
        "language modeling": (fastcollate.DataCollatorForLanguageModeling,
                              DataCollatorForLanguageModeling, {"mlm": False}),
    }
    ours_class, theirs_class, options = classes[name]
    call_both(
        ours_class(bert_tokenizer, return_tensors=return_tensors, **options),
        theirs_class(bert_tokenizer, return_tensors=return_tensors, **options),
        rows,
        "score",
        values,
    )


@pytest.mark.parametrize("fmt", ["lists", "numpy"])
def test_zero_d_arrays_beside_list_token_ids_are_stacked(bert_tokenizer, fmt):
    # Where transformers' "np" conversion fails on a 0-d array first (len() of it), fastcollate
    # gives what np.asarray makes of the values; with numpy token ids both agree.
    values = [np.asarray(np.uint8(3)), np.uint8(200), np.asarray(np.int8(-1))]
    rows = [{"input_ids": _token_ids(fmt, [101] * (i + 1)), "score": value}
            for i, value in enumerate(values)]
    ours = fastcollate.pad(rows, bert_tokenizer, return_tensors="np")
    if fmt == "lists":
        with pytest.raises(ValueError):
            bert_tokenizer.pad(rows, return_tensors="np")
        expected = np.asarray(values)
        assert ours["score"].dtype == expected.dtype
        np.testing.assert_array_equal(ours["score"], expected)
    else:
        assert_same_batch(ours, bert_tokenizer.pad(rows, return_tensors="np"))


def _same_objects(ours, theirs):
    assert type(ours) is type(theirs), (ours, theirs)
    if isinstance(theirs, list):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs, strict=True):
            _same_objects(a, b)
    elif isinstance(theirs, np.generic):
        assert ours.dtype == theirs.dtype and ours == theirs
    else:
        assert ours == theirs


@given(st.lists(scalar() | st.lists(scalar(), max_size=3) | st.sampled_from([None, "text"]),
                min_size=1, max_size=5))
@settings(max_examples=examples(200), deadline=None)
def test_as_python_values_is_transformers_to_py_obj(values):
    # The conversion tokenizer.pad applies to one key of a numpy / torch batch, value for value
    # and type for type (numpy scalars kept only where every value is a number).
    from transformers.utils.generic import to_py_obj

    from fastcollate._internal.python_values import as_python_values

    _same_objects(as_python_values(values), to_py_obj(values))


@pytest.mark.parametrize(
    ("value", "return_tensors"),
    [(np.asarray(np.int8(3)), "np"), (np.asarray(np.int8(3)), None), (np.uint8(3), None),
     (np.float32(2.5), None), (np.bool_(True), None), (np.asarray([1.5, 2.5], np.float16), "pt"),
     (np.asarray([1.5, 2.5], np.float16), "np"), (torch.tensor([1, 2], dtype=torch.int16), "pt"),
     (torch.tensor([1, 2], dtype=torch.int16), "np")],
    ids=repr,
)
def test_one_example_keeps_its_values_beside_list_token_ids(bert_tokenizer, value,
                                                            return_tensors):
    # One example (a mapping whose token ids are a flat list): transformers hands its other
    # values to BatchEncoding as they are, which keeps their dtype.
    example = {"input_ids": [101, 5], "score": value}
    expected = bert_tokenizer.pad(dict(example), return_tensors=return_tensors)
    ours = fastcollate.pad(dict(example), bert_tokenizer, return_tensors=return_tensors)
    if isinstance(expected["score"], np.generic):
        _same_objects(ours["score"], expected["score"])  # the scalar itself, under None
        ours.pop("score"), expected.pop("score")
    assert_same_batch(ours, expected)


@pytest.mark.parametrize("dtype", [np.uint64, np.uint32, np.uint16, np.uint8])
@pytest.mark.parametrize("return_tensors", ["np", "pt"])
def test_unsigned_scalars_among_listed_token_ids(bert_tokenizer, dtype, return_tensors):
    """numpy unsigned scalars among Python ints in listed token ids: int64 ids on `pad` and
    every token collator, whatever the dtype. transformers gives what its construction makes
    of the mix: float64 for uint64 under "np" (numpy's promotion of uint64 with int), int64 for
    the narrower ones, and it cannot build "pt" tensors of unsigned scalars at all. The uint64
    case is a documented difference (docs/differences.md, "numpy uint64 scalars")."""
    rows = [{"input_ids": [101, dtype(7), 102]}, {"input_ids": [101, 102]}]
    reference = None
    try:
        reference = bert_tokenizer.pad(copy.deepcopy(rows), return_tensors=return_tensors)
    except ValueError:
        assert return_tensors == "pt" and dtype in (np.uint64, np.uint32, np.uint16)
    if reference is not None:
        expected = (np.float64 if dtype is np.uint64 and return_tensors == "np"
                    else (np.int64 if return_tensors == "np" else torch.int64))
        assert reference["input_ids"].dtype == expected
    int64 = np.int64 if return_tensors == "np" else torch.int64
    labelled = [{**row, "labels": list(row["input_ids"])} for row in rows]
    outputs = [
        fastcollate.pad(rows, bert_tokenizer, return_tensors=return_tensors),
        fastcollate.DataCollatorWithPadding(bert_tokenizer, return_tensors=return_tensors)(rows),
        fastcollate.DataCollatorForTokenClassification(
            bert_tokenizer, return_tensors=return_tensors)(labelled),
        fastcollate.DataCollatorForSeq2Seq(bert_tokenizer, return_tensors=return_tensors)(
            labelled),
        fastcollate.DataCollatorForLanguageModeling(
            bert_tokenizer, mlm=False, return_tensors=return_tensors)(rows),
    ]
    for out in outputs:
        assert out["input_ids"].dtype == int64
        assert np.asarray(out["input_ids"]).tolist()[0] == [101, 7, 102]
        if reference is not None and reference["input_ids"].dtype == int64:
            assert_same_batch(outputs[0], reference)
    text = (ROOT / "docs" / "differences.md").read_text(encoding="utf-8")
    assert "numpy uint64 scalars among listed token ids" in text
