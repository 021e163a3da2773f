"""Differential tests: fastcollate.pad / DataCollatorWithPadding / default_data_collator against
transformers' own tokenizer.pad / DataCollatorWithPadding / default_data_collator on the same
batches (hypothesis-generated: lists / numpy / torch rows, every padding option, both sides)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import transformers
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import fastcollate
from tests.support.compare import assert_same_batch, assert_same_value, has_object_array
from tests.support.hypothesis_profiles import examples

pytestmark = pytest.mark.parity

SETTINGS = settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
OPTIONAL_KEYS = ("token_type_ids", "attention_mask", "special_tokens_mask")
INT_DTYPES = (np.int64, np.int32, np.int16, np.uint8, np.uint16)


def to_format(values, fmt, dtype, strided):
    """A row value in one of the three formats transformers accepts."""
    if fmt == "list":
        return list(values)
    if fmt == "tuple":
        return tuple(values)
    if strided:
        # A non-contiguous view: every other element of a twice-as-long array.
        base = np.zeros(2 * len(values), dtype=dtype)
        base[::2] = values
        array = base[::2]
    else:
        array = np.asarray(values, dtype=dtype)
    return array if fmt == "numpy" else torch.from_numpy(np.ascontiguousarray(array))


@st.composite
def batches(draw, with_label=True):
    size = draw(st.integers(1, 6))
    lengths = draw(st.lists(st.integers(0, 12), min_size=size, max_size=size))
    keys = draw(st.sets(st.sampled_from(OPTIONAL_KEYS)))
    fmt = draw(st.sampled_from(["list", "tuple", "numpy", "torch"]))
    dtype = draw(st.sampled_from(INT_DTYPES))
    strided = draw(st.booleans())
    label = draw(st.sampled_from([None, "int", "float"])) if with_label else None
    rows = []
    for length in lengths:
        ids = draw(st.lists(st.integers(1, 250), min_size=length, max_size=length))
        row = {"input_ids": to_format(ids, fmt, dtype, strided)}
        for key in sorted(keys):
            values = draw(st.lists(st.integers(0, 1), min_size=length, max_size=length))
            row[key] = to_format(values, fmt, dtype, strided)
        if label == "int":
            row["label"] = draw(st.integers(0, 5))
        elif label == "float":
            row["label"] = draw(st.floats(-10, 10, allow_nan=False, width=32))
        rows.append(row)
    return rows


padding_options = st.fixed_dictionaries(
    {
        "padding": st.sampled_from([True, False, "longest", "max_length", "do_not_pad"]),
        "max_length": st.one_of(st.none(), st.integers(0, 16)),
        "pad_to_multiple_of": st.one_of(st.none(), st.integers(1, 8)),
        "padding_side": st.sampled_from([None, "left", "right"]),
        "return_attention_mask": st.sampled_from([None, True, False]),
        "return_tensors": st.sampled_from([None, "np", "pt"]),
    }
)


def longer_than_max_length(rows, options, tokenizer):
    """transformers never truncates and silently leaves such rows unpadded; fastcollate raises."""
    if options["padding"] != "max_length":
        return False
    limit = options["max_length"]
    if limit is None:
        limit = tokenizer.model_max_length
    if options["pad_to_multiple_of"] and limit % options["pad_to_multiple_of"]:
        limit = (limit // options["pad_to_multiple_of"] + 1) * options["pad_to_multiple_of"]
    return any(len(r["input_ids"]) > limit for r in rows)


PADDED_KEYS = ("input_ids", "token_type_ids", "special_tokens_mask")


def ragged_without_padding(rows, options):
    """Rows of different lengths under a key left unpadded cannot form a tensor. transformers
    raises, builds an object array, or (when the first row is empty) silently returns a (B, 0)
    tensor that drops the data; fastcollate raises."""
    first = rows[0]["input_ids"]
    return_tensors = options["return_tensors"]
    if return_tensors is None and isinstance(first, (np.ndarray, torch.Tensor)):
        return_tensors = "tensor"
    if return_tensors is None:
        return False
    padded = () if options["padding"] in (False, "do_not_pad") else PADDED_KEYS
    if options.get("return_attention_mask") is not False and padded:
        padded += ("attention_mask",)
    return any(
        len({len(r[key]) for r in rows}) > 1
        for key in rows[0]
        if key not in padded and key != "label"
    )


def tuples_to_lists(rows):
    """transformers concatenates lists onto tuple rows (a TypeError when a tuple needs padding);
    fastcollate reads tuples as lists, so the reference runs on lists."""
    return [{k: list(v) if isinstance(v, tuple) else v for k, v in r.items()} for r in rows]


def run_both(ours_fn, theirs_fn, rows, must_fail=False):
    """Runs transformers on a deep copy; where it fails or builds an object array fastcollate
    must raise a clear error, else both outputs must be identical. The input stays untouched."""
    snapshot = copy.deepcopy(rows)
    try:
        theirs = theirs_fn(tuples_to_lists(copy.deepcopy(rows)))
        theirs_failed = has_object_array(theirs)
    except (ValueError, TypeError, RuntimeError):
        theirs_failed = True
    if theirs_failed or must_fail:
        with pytest.raises((ValueError, TypeError)):
            ours_fn(rows)
    else:
        assert_same_batch(ours_fn(rows), theirs)
    assert_unchanged(rows, snapshot)


def assert_unchanged(rows, snapshot):
    assert len(rows) == len(snapshot)
    for row, before in zip(rows, snapshot, strict=True):
        assert list(row) == list(before)
        for key in row:
            a, b = row[key], before[key]
            if isinstance(a, (np.ndarray, torch.Tensor)):
                assert type(a) is type(b) and a.dtype == b.dtype
                assert np.array_equal(np.asarray(a), np.asarray(b))
            else:
                assert a == b and type(a) is type(b)


@SETTINGS
@given(rows=batches(), options=padding_options)
def test_pad_matches_tokenizer_pad(bert_tokenizer, rows, options):
    run_both(
        lambda r: fastcollate.pad(r, bert_tokenizer, **options),
        lambda r: bert_tokenizer.pad(r, **options),
        rows,
        must_fail=longer_than_max_length(rows, options, bert_tokenizer)
        or ragged_without_padding(rows, options),
    )


@SETTINGS
@given(rows=batches(), options=padding_options)
def test_pad_dict_of_lists_matches(bert_tokenizer, rows, options):
    keys = list(rows[0])
    columnar = {k: [r[k] for r in rows] for k in keys}
    must_fail = longer_than_max_length(rows, options, bert_tokenizer) or ragged_without_padding(
        rows, options
    )
    snapshot = copy.deepcopy(columnar)
    try:
        reference = {k: [list(v) if isinstance(v, tuple) else v for v in vs]
                     for k, vs in copy.deepcopy(columnar).items()}
        theirs = bert_tokenizer.pad(reference, **options)
        failed = has_object_array(theirs)
    except (ValueError, TypeError, RuntimeError):
        failed = True
    if failed or must_fail:
        with pytest.raises((ValueError, TypeError)):
            fastcollate.pad(columnar, bert_tokenizer, **options)
    else:
        assert_same_batch(fastcollate.pad(columnar, bert_tokenizer, **options), theirs)
    for key in keys:
        assert_unchanged([{key: v} for v in columnar[key]], [{key: v} for v in snapshot[key]])


@SETTINGS
@given(rows=batches(with_label=False), options=padding_options, index=st.integers(0, 5))
def test_pad_single_example_matches(bert_tokenizer, rows, options, index):
    example = rows[index % len(rows)]
    must_fail = longer_than_max_length([example], options, bert_tokenizer)
    # transformers returns an empty mapping unchanged; fastcollate raises (documented)
    assume(len(example["input_ids"]) > 0)
    if isinstance(example["input_ids"], np.ndarray):
        # transformers fails on one numpy example ("type of 1 unknown: numpy.int64");
        # fastcollate pads it as it pads a numpy batch: compare with the same data as lists.
        def theirs(r):
            lists = {k: v.tolist() for k, v in r[0].items()}
            return bert_tokenizer.pad(lists, **{**options, "return_tensors":
                                                options["return_tensors"] or "np"})
    else:
        def theirs(r):
            return bert_tokenizer.pad(r[0], **options)
    run_both(
        lambda r: fastcollate.pad(r[0], bert_tokenizer, **options),
        theirs,
        [example],
        must_fail=must_fail,
    )


@SETTINGS
@given(
    rows=batches(),
    padding=st.sampled_from([True, "longest", "max_length", False]),
    max_length=st.one_of(st.none(), st.integers(8, 16)),
    pad_to_multiple_of=st.one_of(st.none(), st.integers(1, 8)),
    return_tensors=st.sampled_from(["pt", "np"]),
    side=st.sampled_from(["left", "right"]),
)
def test_data_collator_with_padding_matches(
    bert_tokenizer, rows, padding, max_length, pad_to_multiple_of, return_tensors, side
):
    tokenizer = copy.copy(bert_tokenizer)
    tokenizer.padding_side = side
    kwargs = dict(
        padding=padding,
        max_length=max_length,
        pad_to_multiple_of=pad_to_multiple_of,
        return_tensors=return_tensors,
    )
    ours = fastcollate.DataCollatorWithPadding(tokenizer, **kwargs)
    theirs = transformers.DataCollatorWithPadding(tokenizer, **kwargs)
    options = dict(
        padding=padding,
        max_length=max_length,
        pad_to_multiple_of=pad_to_multiple_of,
        return_tensors=return_tensors,
    )
    must_fail = longer_than_max_length(rows, options, tokenizer) or ragged_without_padding(
        rows, options
    )
    run_both(ours, theirs, rows, must_fail=must_fail)


@SETTINGS
@given(
    first=batches(),
    then=st.lists(batches(), min_size=1, max_size=3),
    padding=st.sampled_from([True, "max_length"]),
    pad_to_multiple_of=st.one_of(st.none(), st.integers(1, 8)),
    return_tensors=st.sampled_from(["pt", "np"]),
)
def test_data_collator_with_padding_matches_batch_after_batch(
    bert_tokenizer, first, then, padding, pad_to_multiple_of, return_tensors
):
    # One collator for every batch: from the second call on it pads with the options its
    # first successful call settled (its call plan), whatever the rows' format.
    kwargs = dict(
        padding=padding,
        max_length=16 if padding == "max_length" else None,
        pad_to_multiple_of=pad_to_multiple_of,
        return_tensors=return_tensors,
    )
    ours = fastcollate.DataCollatorWithPadding(bert_tokenizer, **kwargs)
    theirs = transformers.DataCollatorWithPadding(bert_tokenizer, **kwargs)
    padded = []

    def ours_recorded(rows):
        batch = ours(rows)
        padded.append(rows)
        return batch

    for rows in [first, *then]:
        must_fail = longer_than_max_length(rows, kwargs, bert_tokenizer) or (
            ragged_without_padding(rows, kwargs)
        )
        run_both(ours_recorded, theirs, rows, must_fail=must_fail)
        # Settled by the first call that succeeds: the batches after it go through the plan.
        assert (ours._call_plan is not None) == bool(padded)


def test_data_collator_with_padding_renames_label_ids(bert_tokenizer):
    rows = [{"input_ids": [1, 2, 3], "label_ids": [4, 5]}, {"input_ids": [6], "label_ids": [7, 8]}]
    ours = fastcollate.DataCollatorWithPadding(bert_tokenizer)(copy.deepcopy(rows))
    theirs = transformers.DataCollatorWithPadding(bert_tokenizer)(copy.deepcopy(rows))
    assert_same_batch(ours, theirs)


@st.composite
def default_collator_batches(draw):
    size = draw(st.integers(1, 5))
    length = draw(st.integers(0, 8))
    fmt = draw(st.sampled_from(["list", "numpy", "torch"]))
    dtype = draw(st.sampled_from(INT_DTYPES + (np.float32, np.float64)))
    label = draw(st.sampled_from(["int", "float", "bool", "label_ids", "label_ids_float", None]))
    extra_float = draw(st.booleans())
    rows = []
    for _ in range(size):
        values = draw(st.lists(st.integers(0, 100), min_size=length, max_size=length))
        row = {"input_ids": to_format(values, fmt, dtype, False), "text": "skipped", "none": None}
        if extra_float:
            row["score"] = draw(st.floats(-5, 5, allow_nan=False, width=32))
        if label == "int":
            row["label"] = draw(st.integers(0, 9))
        elif label == "float":
            row["label"] = draw(st.floats(-1, 1, allow_nan=False, width=32))
        elif label == "bool":
            row["label"] = draw(st.booleans())
        elif label == "label_ids":
            row["label_ids"] = to_format(
                draw(st.lists(st.integers(0, 3), min_size=3, max_size=3)), fmt, dtype, False
            )
        elif label == "label_ids_float":
            row["label_ids"] = [draw(st.floats(0, 1, width=32)) for _ in range(2)]
        rows.append(row)
    return rows


@SETTINGS
@given(rows=default_collator_batches(), return_tensors=st.sampled_from(["pt", "np"]))
def test_default_data_collator_matches(rows, return_tensors):
    run_both(
        lambda r: fastcollate.default_data_collator(r, return_tensors),
        lambda r: transformers.default_data_collator(r, return_tensors),
        rows,
    )
    run_both(
        fastcollate.DefaultDataCollator(return_tensors=return_tensors),
        transformers.DefaultDataCollator(return_tensors=return_tensors),
        rows,
    )


@pytest.mark.parametrize("return_tensors", ["pt", "np"])
@pytest.mark.parametrize(
    "labels",
    [
        {"label": np.int64(1)},
        {"label": np.int32(0)},
        {"label_ids": np.array([0, 2])},
        {"label_ids": [np.int64(0), np.int64(2)]},
        {"label_ids": [np.uint8(1), np.uint8(3)]},
    ],
    ids=["np.int64 label", "np.int32 label", "label_ids array", "label_ids np.int64",
         "label_ids np.uint8"],
)
def test_default_data_collator_numpy_integer_labels(labels, return_tensors):
    # transformers 5.22 made numpy integers count as ints here (int64 labels); before, they
    # gave float32 labels. Whichever transformers is installed (5.20 on Python 3.10 in CI) is
    # the one matched.
    rows = [{"input_ids": [1, 2, 3], **copy.deepcopy(labels)} for _ in range(2)]
    run_both(
        lambda r: fastcollate.default_data_collator(r, return_tensors=return_tensors),
        lambda r: transformers.default_data_collator(r, return_tensors=return_tensors),
        rows,
    )


def test_default_data_collator_takes_objects_through_vars():
    class Example:
        def __init__(self, ids, label):
            self.input_ids = ids
            self.label = label

    rows = [Example([1, 2], 0), Example([3, 4], 1)]
    for rt in ("pt", "np"):
        ours = fastcollate.default_data_collator(rows, rt)
        theirs = transformers.default_data_collator(rows, rt)
        assert list(ours) == list(theirs)
        for key in theirs:
            assert_same_value(key, ours[key], theirs[key])


def test_pad_without_tokenizer_uses_keyword_settings():
    rows = [{"input_ids": [5, 6, 7]}, {"input_ids": [8]}]
    out = fastcollate.pad(rows, pad_token_id=9, padding_side="left", return_tensors="np")
    np.testing.assert_array_equal(out["input_ids"], [[5, 6, 7], [9, 9, 8]])
    np.testing.assert_array_equal(out["attention_mask"], [[1, 1, 1], [0, 0, 1]])
    assert out["input_ids"].dtype == np.int64


def test_pad_returns_batch_encoding_that_moves_to_device(bert_tokenizer):
    out = fastcollate.pad([{"input_ids": [1, 2]}, {"input_ids": [3]}], bert_tokenizer,
                          return_tensors="pt")
    assert isinstance(out, transformers.BatchEncoding)
    moved = out.to("cpu")
    assert torch.equal(moved["input_ids"], torch.tensor([[1, 2], [3, 0]]))


@pytest.mark.parametrize("planned", [False, True], ids=["through pad", "through a call plan"])
def test_collator_batch_encoding_holds_what_transformers_one_holds(bert_tokenizer, planned):
    rows = [{"input_ids": [1, 2], "label": 0}, {"input_ids": [3], "label": 1}]
    ours = fastcollate.DataCollatorWithPadding(bert_tokenizer)
    theirs = transformers.DataCollatorWithPadding(bert_tokenizer)([dict(r) for r in rows])
    # The first call goes through `pad` and settles a plan, which the second call follows.
    for _ in range(2 if planned else 1):
        out = ours([dict(r) for r in rows])
    assert ours._call_plan is not None
    assert type(out) is type(theirs)
    assert vars(out).keys() == vars(theirs).keys()
    assert {k: v for k, v in vars(out).items() if k != "data"} == {
        k: v for k, v in vars(theirs).items() if k != "data"
    }
    assert type(out.data) is type(theirs.data) and list(out.data) == list(theirs.data)
    assert out.is_fast == theirs.is_fast and out.n_sequences == theirs.n_sequences
