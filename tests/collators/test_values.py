"""Values that change silently no more (issue 40, items 1-4), on every entry point that shares
the rule, against the installed transformers:

1. floats among token ids: transformers raises for a Python float first id and returns float
   ids when a later one is a float (one stray value turns the batch's ids into floats, which
   no embedding takes); fastcollate raises for any Python float among token ids, naming the
   row. Float numpy arrays and torch tensors pad as floats, as transformers pads them.
2. a key only later rows hold: transformers takes a batch's keys from its first row and drops
   it; fastcollate raises, naming the key and the row.
3. not a tokenizer: refused when the collator is made, with a TypeError saying what to pass.
4. numpy scalars keep their dtype inside lists too; uint64 beside a Python int above int64 is
   exact, as numpy makes it.
"""

from __future__ import annotations

import copy
import warnings

import datasets
import numpy as np
import pytest
import torch
import transformers

import fastcollate
from fastcollate.arrow import ArrowBatches
from tests.support.compare import assert_same_batch

pytestmark = pytest.mark.parity

# The collators whose rows are padded with the tokenizer's rules (keys from the first row, the
# main input padded), each made as both libraries make it.
TOKEN_COLLATORS = [
    pytest.param(("DataCollatorWithPadding", {}), id="with-padding"),
    pytest.param(("DataCollatorForTokenClassification", {}), id="token-classification"),
    pytest.param(("DataCollatorForSeq2Seq", {}), id="seq2seq"),
    pytest.param(("DataCollatorForLanguageModeling", {"mlm": False}), id="language-modeling"),
]


def _pad_call(module, tokenizer, return_tensors):
    pad = tokenizer.pad if module is transformers else (
        lambda rows, **kw: fastcollate.pad(rows, tokenizer, **kw))
    return lambda rows: pad(rows, return_tensors=return_tensors)


def _entry_points(tokenizer):
    """(name, transformers' callable, fastcollate's callable) for every entry point."""
    points = []
    for return_tensors in (None, "np", "pt"):
        points.append((f"pad-{return_tensors}", _pad_call(transformers, tokenizer, return_tensors),
                       _pad_call(fastcollate, tokenizer, return_tensors)))
    for param in TOKEN_COLLATORS:
        name, options = param.values[0]
        points.append((name, getattr(transformers, name)(tokenizer, **options),
                       getattr(fastcollate, name)(tokenizer, **options)))
    return points


def _outcome(call, rows):
    rows = copy.deepcopy(rows)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return call(rows), None
    except (ValueError, TypeError, KeyError) as err:
        return None, err


def _assert_agree(entry_points, rows):
    """Each entry point raises where transformers' does, and otherwise gives its batch."""
    for name, theirs, ours in entry_points:
        expected, their_error = _outcome(theirs, rows)
        got, our_error = _outcome(ours, rows)
        if their_error is not None:
            assert our_error is not None, name
            continue
        assert our_error is None, f"{name}: {our_error}"
        assert_same_batch(dict(got), dict(expected))


# --- 1. floats among token ids --------------------------------------------------------------

LISTED_FLOATS = {
    # row 0's first id a float: transformers raises too
    "first-float": ([[1.0, 2.5], [3]], 0),
    "first-float-tuple": ([(1.5, 2), [3]], 0),
    # an int first, a float later: transformers returns float ids
    "later-float-same-row": ([[1, 2.5], [3]], 0),
    "later-float-later-row": ([[1, 2], [3, 4.5]], 1),
    "integral-float": ([[1, 2], [3.0]], 1),
    "numpy-float-scalar": ([[1, 2], [3, np.float32(4.0)]], 1),
    "empty-first-row": ([[], [3.5]], 1),
}


@pytest.mark.parametrize("case", list(LISTED_FLOATS), ids=str)
def test_a_float_among_listed_token_ids_names_its_row(bert_tokenizer, case):
    ids, bad_row = LISTED_FLOATS[case]
    rows = [{"input_ids": row} for row in ids]
    before = copy.deepcopy(rows)
    for name, theirs, ours in _entry_points(bert_tokenizer):
        expected, their_error = _outcome(theirs, rows)
        got, our_error = _outcome(ours, rows)
        assert got is None, f"{name}: {case} was padded"
        assert isinstance(our_error, ValueError), name
        assert f"'input_ids' in row {bad_row} holds floats" in str(our_error), name
        if bad_row == 0 and case.startswith("first"):
            # where transformers raises, it raises the same class
            assert isinstance(their_error, ValueError), name
        elif their_error is None:
            # the documented difference: transformers turned every id into a float
            value = expected["input_ids"]
            if isinstance(value, torch.Tensor):
                assert value.dtype.is_floating_point, name
            elif isinstance(value, np.ndarray):
                assert value.dtype.kind == "f", name
            else:
                assert any(isinstance(v, (float, np.floating)) for row in value for v in row), name
    assert rows == before


def test_a_float_among_listed_token_ids_of_one_example(bert_tokenizer):
    with pytest.raises(ValueError):
        bert_tokenizer.pad({"input_ids": [1.0, 2.0]})
    with pytest.raises(ValueError, match="'input_ids' in row 0 holds floats"):
        fastcollate.pad({"input_ids": [1.0, 2.0]}, bert_tokenizer)
    with pytest.raises(ValueError, match="'input_ids' in row 1 holds floats"):
        fastcollate.pad({"input_ids": [[1, 2], [1.5]]}, bert_tokenizer)


@pytest.mark.parametrize("row_format",
                         ["numpy32", "numpy64", "torch32", "torch64", "int-then-float"])
def test_float_arrays_and_tensors_of_token_ids_pad_as_transformers(bert_tokenizer, row_format):
    def make(values, dtype):
        if row_format.startswith("numpy"):
            return np.array(values, dtype={"32": np.float32, "64": np.float64}[row_format[-2:]])
        if row_format.startswith("torch"):
            return torch.tensor(values, dtype={"32": torch.float32,
                                               "64": torch.float64}[row_format[-2:]])
        return np.array(values, dtype=dtype)

    rows = [{"input_ids": make([1.0, 2.5, 3.0], np.int64 if row_format == "int-then-float"
                               else None)},
            {"input_ids": make([4.0], np.float32)}]
    if row_format == "int-then-float":
        rows[0]["input_ids"] = np.array([1, 2, 3])
    _assert_agree(_entry_points(bert_tokenizer), rows)


def _arrow_batch(data, features):
    dataset = datasets.Dataset.from_dict(data, features=datasets.Features(features))
    return dataset, ArrowBatches(dataset).__getitems__(list(range(len(dataset))))


@pytest.mark.parametrize("value_type", ["float16", "float32", "float64"])
def test_a_float_token_id_column_in_arrow_is_refused_as_its_rows_are(bert_tokenizer, value_type):
    dataset, batch = _arrow_batch(
        {"input_ids": [[1.0, 2.0], [3.0]]},
        {"input_ids": datasets.List(datasets.Value(value_type))},
    )
    rows = dataset.__getitems__([0, 1])
    with pytest.raises(ValueError):
        transformers.DataCollatorWithPadding(bert_tokenizer)(rows)  # a Python float first id
    for collate in (fastcollate.DataCollatorWithPadding(bert_tokenizer),
                    lambda b: fastcollate.pad(b, bert_tokenizer)):
        for given in (batch, rows):
            with pytest.raises(ValueError, match="'input_ids' in row 0 holds floats"):
                collate(given)


def test_integer_arrow_token_ids_still_pad(bert_tokenizer):
    dataset, batch = _arrow_batch({"input_ids": [[1, 2], [3]]},
                                  {"input_ids": datasets.List(datasets.Value("int32"))})
    expected = transformers.DataCollatorWithPadding(bert_tokenizer)(dataset.__getitems__([0, 1]))
    assert_same_batch(dict(fastcollate.DataCollatorWithPadding(bert_tokenizer)(batch)),
                      dict(expected))


def test_float_labels_and_masks_are_not_token_ids(bert_tokenizer):
    rows = [{"input_ids": [1, 2], "attention_mask": [1.0, 1.0], "label": 0.5},
            {"input_ids": [3], "attention_mask": [1.0], "label": 1.5}]
    for name, theirs, ours in _entry_points(bert_tokenizer)[:4]:
        expected, their_error = _outcome(theirs, rows)
        got, our_error = _outcome(ours, rows)
        assert (their_error is None) == (our_error is None), name
        if expected is not None:
            assert_same_batch(dict(got), dict(expected))


# --- 2. a key only later rows hold -----------------------------------------------------------

LATER_KEYS = {
    "lists": [{"input_ids": [1, 2]}, {"input_ids": [3], "label": 1}],
    "numpy": [{"input_ids": np.array([1, 2])}, {"input_ids": np.array([3]), "label": 1}],
    "torch": [{"input_ids": torch.tensor([1, 2])}, {"input_ids": torch.tensor([3]),
                                                     "label": torch.tensor(1)}],
    "third-row": [{"input_ids": [1]}, {"input_ids": [2]}, {"input_ids": [3], "score": 0.5}],
    "stacked-mask": [{"input_ids": [1], "attention_mask": np.ones((1, 1), np.int64)},
                     {"input_ids": [2], "attention_mask": np.ones((1, 1), np.int64),
                      "label": 1}],
}


@pytest.mark.parametrize("case", list(LATER_KEYS), ids=str)
def test_a_key_only_later_rows_hold_is_named(bert_tokenizer, case):
    rows = LATER_KEYS[case]
    key, row = next((k, i) for i, r in enumerate(rows) for k in r if k not in rows[0])
    before = copy.deepcopy(rows)
    for name, theirs, ours in _entry_points(bert_tokenizer):
        expected, their_error = _outcome(theirs, rows)
        if expected is not None:  # dropped there
            assert key not in expected, name
        got, our_error = _outcome(ours, rows)
        assert got is None, f"{name}: '{key}' was dropped"
        assert isinstance(our_error, ValueError), name
        assert f"row {row} has a key '{key}' that the first row lacks" in str(our_error), name
    assert [list(r) for r in rows] == [list(r) for r in before]


@pytest.mark.parametrize("return_tensors", ["pt", "np"])
def test_default_collator_names_a_key_only_later_rows_hold(return_tensors):
    rows = [{"x": [1]}, {"x": [2], "label": 1}]
    theirs = transformers.default_data_collator(copy.deepcopy(rows), return_tensors)
    assert list(theirs) == ["x"]  # transformers drops it
    with pytest.raises(ValueError, match="row 1 has a key 'label' that the first row lacks"):
        fastcollate.default_data_collator(rows, return_tensors)
    # A row without one of the first row's keys stays what it was (an error there too).
    with pytest.raises(ValueError, match="row 1 has no key 'label'"):
        fastcollate.default_data_collator([{"x": [1], "label": 1}, {"x": [2]}], return_tensors)


def test_multiple_choice_names_a_key_only_later_examples_hold(bert_tokenizer):
    rows = [{"input_ids": [[1, 2], [3]], "label": 0},
            {"input_ids": [[1], [3]], "label": 1, "extra": [[1], [2]]}]
    theirs = transformers.DataCollatorForMultipleChoice(bert_tokenizer)(copy.deepcopy(rows))
    assert "extra" not in theirs  # transformers drops it
    with pytest.raises(ValueError, match="row 1 has a key 'extra' that the first row lacks"):
        fastcollate.DataCollatorForMultipleChoice(bert_tokenizer)(rows)


def test_same_keys_in_another_order_are_one_batch(bert_tokenizer):
    rows = [{"input_ids": [1, 2], "label": 0}, {"label": 1, "input_ids": [3]}]
    expected = transformers.DataCollatorWithPadding(bert_tokenizer)(copy.deepcopy(rows))
    assert_same_batch(dict(fastcollate.DataCollatorWithPadding(bert_tokenizer)(rows)),
                      dict(expected))


# --- 3. not a tokenizer -----------------------------------------------------------------------

COLLATORS_TAKING_A_TOKENIZER = [
    "DataCollatorWithPadding", "DataCollatorForTokenClassification", "DataCollatorForSeq2Seq",
    "DataCollatorForLanguageModeling", "DataCollatorForMultipleChoice",
]


@pytest.mark.parametrize("name", COLLATORS_TAKING_A_TOKENIZER)
@pytest.mark.parametrize("given", ["bert-base-uncased", 42, 1.5, b"x", object(),
                                   transformers.BertTokenizerFast])
def test_not_a_tokenizer_is_refused_when_the_collator_is_made(name, given):
    # transformers accepts it and fails at the first batch (an AttributeError, mostly)
    with pytest.raises((AttributeError, KeyError, TypeError)):
        collator = getattr(transformers, name)(given, **(
            {"mlm": False} if name == "DataCollatorForLanguageModeling" else {}))
        collator([{"input_ids": [1, 2]}, {"input_ids": [3]}])
    options = {"mlm": False} if name == "DataCollatorForLanguageModeling" else {}
    with pytest.raises(TypeError, match="must be a tokenizer") as error:
        getattr(fastcollate, name)(given, **options)
    if isinstance(given, str):
        assert f"AutoTokenizer.from_pretrained('{given}')" in str(error.value)


@pytest.mark.parametrize("given", ["bert-base-uncased", 42])
def test_pad_refuses_what_is_not_a_tokenizer(given):
    with pytest.raises(TypeError, match="pad's tokenizer must be a tokenizer"):
        fastcollate.pad([{"input_ids": [1]}], given)


def test_speech_collators_refuse_what_is_not_a_processor():
    with pytest.raises(TypeError, match="processor"):
        fastcollate.DataCollatorCTCWithPadding("facebook/wav2vec2-base")
    with pytest.raises(TypeError, match="processor"):
        fastcollate.DataCollatorSpeechSeq2SeqWithPadding(42, decoder_start_token_id=1)


# --- 4. dtypes and values ---------------------------------------------------------------------

NUMPY_SCALAR_LISTS = [
    [np.float64(1.5), np.float64(2.5)],
    [np.float16(1.5), np.float16(2.0)],
    [np.float32(0.25), 1.0],
    [np.int8(1), np.int8(2)],
    [np.uint8(1), 2],
    [np.int32(3), np.int64(4)],
    [np.bool_(True), np.bool_(False)],
]


@pytest.mark.parametrize("values", NUMPY_SCALAR_LISTS, ids=lambda v: str(v[0].dtype))
@pytest.mark.parametrize("main", ["list", "numpy", "torch"])
def test_lists_of_numpy_scalars_keep_their_dtype(bert_tokenizer, values, main):
    make = {"list": list, "numpy": np.array, "torch": torch.tensor}[main]
    rows = [{"input_ids": make([1, 2]), "labels": list(values), "score": values[0]},
            {"input_ids": make([3]), "labels": list(values)[::-1], "score": values[-1]}]
    _assert_agree(_entry_points(bert_tokenizer)[:4], rows)
    same_length = [{"x": list(values)}, {"x": list(values)[::-1]}]
    for return_tensors in ("pt", "np"):
        expected = transformers.default_data_collator(copy.deepcopy(same_length), return_tensors)
        assert_same_batch(fastcollate.default_data_collator(same_length, return_tensors),
                          expected)


@pytest.mark.parametrize("rows", [
    [{"x": np.uint64(2**63 + 1)}, {"x": 2**63 + 1}],
    [{"x": [np.uint64(2**63 + 1)]}, {"x": [2**64 - 1]}],
    [{"x": np.array([2**63 + 1], np.uint64)}, {"x": [2**63 + 1]}],
    [{"x": np.uint64(2**63 + 1)}, {"x": 1}],
    [{"x": np.uint64(5)}, {"x": 2**63 + 7}],
], ids=["scalars", "lists", "array-then-list", "beside-small-int", "small-uint64"])
def test_uint64_beside_python_ints_is_what_numpy_makes(rows):
    expected = transformers.default_data_collator(copy.deepcopy(rows), "np")
    got = fastcollate.default_data_collator(rows, "np")
    assert_same_batch(got, expected)
    try:
        expected = transformers.default_data_collator(copy.deepcopy(rows), "pt")
    except (RuntimeError, ValueError, TypeError, OverflowError):
        with pytest.raises((RuntimeError, ValueError, TypeError, OverflowError)):
            fastcollate.default_data_collator(rows, "pt")
    else:
        assert_same_batch(fastcollate.default_data_collator(rows, "pt"), expected)


# --- 9. transformers' warnings for the same decisions ----------------------------------------

WARNING_CASES = [
    pytest.param(True, 8, id="true-with-max-length"),
    pytest.param("longest", 8, id="longest-with-max-length"),
    pytest.param(True, None, id="true-alone"),
    pytest.param("max_length", 8, id="max-length"),
]


def _warnings_of(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    return [(w.category, str(w.message)) for w in caught
            if "max_length" in str(w.message) or "padding" in str(w.message)]


@pytest.mark.parametrize("padding, max_length", WARNING_CASES)
def test_padding_warnings_are_transformers_own(bert_tokenizer, padding, max_length):
    plain = [{"input_ids": [1, 2, 3]}, {"input_ids": [4]}]
    labelled = [{"input_ids": [1, 2, 3], "labels": [1, 2, 3]}, {"input_ids": [4], "labels": [4]}]
    rows = plain
    pairs = [
        (lambda: bert_tokenizer.pad(copy.deepcopy(rows), padding=padding,
                                    max_length=max_length),
         lambda: fastcollate.pad(copy.deepcopy(rows), bert_tokenizer, padding=padding,
                                 max_length=max_length)),
    ]
    for name in ("DataCollatorWithPadding", "DataCollatorForTokenClassification",
                 "DataCollatorForSeq2Seq"):
        theirs = getattr(transformers, name)(bert_tokenizer, padding=padding,
                                             max_length=max_length)
        ours = getattr(fastcollate, name)(bert_tokenizer, padding=padding,
                                          max_length=max_length)
        rows = plain if name == "DataCollatorWithPadding" else labelled
        for _ in range(2):  # the planned second call of DataCollatorWithPadding too
            pairs.append((lambda t=theirs, r=rows: t(copy.deepcopy(r)),
                          lambda o=ours, r=rows: o(copy.deepcopy(r))))
    for theirs, ours in pairs:
        assert _warnings_of(ours) == _warnings_of(theirs)


def test_verbose_false_silences_the_padding_warning(bert_tokenizer):
    rows = [{"input_ids": [1, 2]}, {"input_ids": [3]}]
    assert _warnings_of(lambda: bert_tokenizer.pad(rows, max_length=4, verbose=False)) == []
    assert _warnings_of(lambda: fastcollate.pad(rows, bert_tokenizer, max_length=4,
                                                verbose=False)) == []
    assert len(_warnings_of(lambda: fastcollate.pad(rows, bert_tokenizer, max_length=4))) == 1
