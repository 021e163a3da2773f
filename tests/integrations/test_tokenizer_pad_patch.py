"""`patch_transformers(tokenizer_pad=True)`: `tokenizer.pad` goes through fastcollate where the
result is transformers' own and through transformers' method everywhere else. Differential:
hypothesis builds calls of every shape `tokenizer.pad` takes (and many it refuses), and each is
made on two deep copies of the input, once with the unpatched method and once patched; the
results (or the exceptions), the warnings and what the call left of its input must be equal."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
import torch
import transformers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transformers.tokenization_utils_base import BatchEncoding, PreTrainedTokenizerBase
from transformers.utils import PaddingStrategy, TensorType

import fastcollate
from fastcollate.integrations import tokenizer_pad as routed
from tests.support.hypothesis_profiles import examples

pytestmark = pytest.mark.parity

SETTINGS = settings(
    max_examples=examples(200),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
ORIGINAL_PAD = PreTrainedTokenizerBase.pad
PADDED_KEYS = ("attention_mask", "token_type_ids", "special_tokens_mask")


def same(ours, theirs, where="value"):
    """Deep equality that also compares container types, dtypes and shapes."""
    assert type(ours) is type(theirs), f"{where}: {type(ours)} != {type(theirs)}"
    if isinstance(theirs, torch.Tensor):
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, where
        assert torch.equal(ours, theirs), where
    elif isinstance(theirs, np.ndarray):
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, where
        if theirs.dtype == object:
            for a, b in zip(ours.ravel(), theirs.ravel(), strict=True):
                same(a, b, where)
        else:
            np.testing.assert_array_equal(ours, theirs, err_msg=where)
    elif isinstance(theirs, (dict, BatchEncoding)):
        assert list(ours.keys()) == list(theirs.keys()), f"{where}: {list(ours)} != {list(theirs)}"
        for key in theirs:
            same(ours[key], theirs[key], f"{where}[{key!r}]")
    elif isinstance(theirs, (list, tuple)):
        assert len(ours) == len(theirs), where
        for index, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            same(a, b, f"{where}[{index}]")
    elif isinstance(theirs, float) and theirs != theirs:
        assert ours != ours, where
    else:
        assert ours == theirs, f"{where}: {ours!r} != {theirs!r}"


def outcome(call):
    """(result or None, (exception type, message) or None, warnings' messages)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result, error = call(), None
        except Exception as err:  # noqa: BLE001 - compared with transformers' exception
            result, error = None, (type(err), str(err))
    return result, error, [str(w.message) for w in caught]


def assert_same_call(tokenizer, inputs, options):
    theirs_input, ours_input = copy.deepcopy(inputs), copy.deepcopy(inputs)
    theirs = outcome(lambda: ORIGINAL_PAD(tokenizer, theirs_input, **options))
    with fastcollate.patch_transformers(tokenizer_pad=True):
        assert PreTrainedTokenizerBase.pad is routed.tokenizer_pad
        ours = outcome(lambda: tokenizer.pad(ours_input, **options))
    assert PreTrainedTokenizerBase.pad is ORIGINAL_PAD
    assert ours[1] == theirs[1], (ours[1], theirs[1])
    assert ours[2] == theirs[2]
    if theirs[1] is None:
        same(ours[0], theirs[0], "result")
    same(ours_input, theirs_input, "input after the call")


# --- the inputs -------------------------------------------------------------------------

INT_DTYPES = (np.int64, np.int32, np.int16, np.uint8)


@st.composite
def sequence(draw, length, fmt, low=0, high=250):
    values = draw(st.lists(st.integers(low, high), min_size=length, max_size=length))
    if fmt == "list":
        return values
    if fmt == "tuple":
        return tuple(values)
    if fmt == "bool-first":
        return [True, *values[1:]] if values else [True]
    if fmt == "floats":
        return [float(v) for v in values]
    if fmt == "numpy-scalars":
        return [np.int64(v) for v in values]
    if fmt == "numpy":
        return np.asarray(values, dtype=draw(st.sampled_from(INT_DTYPES)))
    if fmt == "numpy-2d":
        return np.asarray([values, values], dtype=np.int64)
    return torch.tensor(values, dtype=draw(st.sampled_from([torch.int64, torch.int32])))


COMMON_FORMATS = ["list", "list", "list", "numpy", "torch"]
RARE_FORMATS = ["tuple", "bool-first", "floats", "numpy-scalars", "numpy-2d"]
EXTRA_VALUES = ["int", "float", "bool", "list", "ragged-list", "numpy-scalar", "numpy-0d",
                "tensor-0d", "tensor-1d", "str", "none"]


@st.composite
def extra_value(draw, kind, index):
    if kind == "int":
        return draw(st.integers(-3, 3))
    if kind == "float":
        return draw(st.floats(-2, 2, allow_nan=False))
    if kind == "bool":
        return draw(st.booleans())
    if kind == "list":
        return [index, 2, 3]
    if kind == "ragged-list":
        return list(range(index + 1))
    if kind == "numpy-scalar":
        return np.int32(index)
    if kind == "numpy-0d":
        return np.array(index)
    if kind == "tensor-0d":
        return torch.tensor(float(index))
    if kind == "tensor-1d":
        return torch.tensor([index, 1])
    if kind == "str":
        return f"row {index}"
    return None


@st.composite
def rows(draw):
    size = draw(st.integers(1, 5))
    uniform = draw(st.booleans())
    main_format = draw(st.sampled_from(COMMON_FORMATS if uniform else COMMON_FORMATS
                                       + RARE_FORMATS))
    keys = sorted(draw(st.sets(st.sampled_from(PADDED_KEYS))))
    extras = draw(st.lists(st.sampled_from(EXTRA_VALUES), max_size=2))
    empty_rows = draw(st.sampled_from(["none", "none", "some", "all"]))
    built = []
    for index in range(size):
        length = draw(st.integers(1, 9))
        if empty_rows == "all" or (empty_rows == "some" and draw(st.booleans())):
            length = 0
        fmt = main_format if uniform or draw(st.integers(0, 4)) else draw(
            st.sampled_from(COMMON_FORMATS + RARE_FORMATS))
        row = {"input_ids": draw(sequence(length, fmt, low=1))}
        for key in keys:
            key_format = fmt if uniform or draw(st.integers(0, 4)) else draw(
                st.sampled_from(COMMON_FORMATS + RARE_FORMATS))
            key_length = length if uniform or draw(st.integers(0, 5)) else length + 1
            row[key] = draw(sequence(key_length, key_format, high=1))
        for number, kind in enumerate(extras):
            row[f"extra{number}"] = draw(extra_value(kind, index))
        if not uniform and index and draw(st.integers(0, 6)) == 0:
            row.pop(draw(st.sampled_from(list(row))))  # a row without a key the first has
        built.append(row)
    return built


@st.composite
def encoded_inputs(draw):
    batch = draw(rows())
    form = draw(st.sampled_from(["list", "list", "list", "tuple", "dict", "batch-encoding",
                                 "single", "batch-encoding-rows", "empty"]))
    if form == "list":
        return batch
    if form == "tuple":
        return tuple(batch)
    if form == "batch-encoding-rows":
        return [BatchEncoding(row) for row in batch]
    if form == "single":
        return batch[0]
    if form == "empty":
        return []
    columns = {key: [row.get(key) for row in batch] for key in batch[0]}
    return columns if form == "dict" else BatchEncoding(columns)


OPTIONS = st.fixed_dictionaries(
    {},
    optional={
        "padding": st.sampled_from([True, False, "longest", "max_length", "do_not_pad",
                                    PaddingStrategy.LONGEST, PaddingStrategy.MAX_LENGTH,
                                    "bogus", 1]),
        "max_length": st.sampled_from([None, 0, 3, 8, 16]),
        "pad_to_multiple_of": st.sampled_from([None, 1, 3, 8]),
        "padding_side": st.sampled_from([None, "left", "right", "middle"]),
        "return_attention_mask": st.sampled_from([None, True, False]),
        "return_tensors": st.sampled_from([None, "np", "pt", "pt", "np", TensorType.PYTORCH,
                                           TensorType.NUMPY, "tf"]),
        "verbose": st.booleans(),
    },
)


@pytest.fixture(scope="module")
def tokenizers(bert_tokenizer):
    """The BERT tokenizer as it is, with left padding and another pad token type, without a
    pad token, and with an unbounded model_max_length (padding="max_length" pads nothing)."""
    left = copy.deepcopy(bert_tokenizer)
    left.padding_side = "left"
    left._pad_token_type_id = 1
    no_pad = copy.deepcopy(bert_tokenizer)
    no_pad.pad_token = None
    unbounded = copy.deepcopy(bert_tokenizer)
    unbounded.model_max_length = int(1e30)
    short = copy.deepcopy(bert_tokenizer)
    short.model_max_length = 12
    no_mask = copy.deepcopy(bert_tokenizer)
    no_mask.model_input_names = ["input_ids", "token_type_ids"]
    return [bert_tokenizer, left, no_pad, unbounded, short, no_mask]


@SETTINGS
@given(data=st.data())
def test_patched_pad_gives_transformers_result(tokenizers, data):
    tokenizer = data.draw(st.sampled_from(tokenizers))
    assert_same_call(tokenizer, data.draw(encoded_inputs()), data.draw(OPTIONS))


@SETTINGS
@given(data=st.data())
def test_patched_pad_on_plain_batches(tokenizers, data):
    """The batches custom collators pass, with every option: these take fastcollate's route."""
    tokenizer = data.draw(st.sampled_from(tokenizers[:2] + tokenizers[4:]))
    fmt = data.draw(st.sampled_from(["list", "numpy", "torch"]))
    keys = sorted(data.draw(st.sets(st.sampled_from(PADDED_KEYS))))
    batch = []
    for index in range(data.draw(st.integers(1, 6))):
        length = data.draw(st.integers(1, 10))
        row = {"input_ids": data.draw(sequence(length, fmt, low=1))}
        for key in keys:
            row[key] = data.draw(sequence(length, fmt, high=1))
        if fmt == "list" and data.draw(st.booleans()):
            row["labels"] = index % 2
        batch.append(row)
    options = data.draw(OPTIONS)
    if fmt == "list" or options.get("return_tensors") == "tf":
        options["return_tensors"] = data.draw(st.sampled_from(["pt", "np"]))
    assert_same_call(tokenizer, batch, options)


def test_plain_batches_take_the_fast_route(bert_tokenizer, monkeypatch):
    calls = []

    def counting(*args, **kwargs):
        calls.append(1)
        return fastcollate.pad(*args, **kwargs)

    monkeypatch.setattr(routed, "fastcollate_pad", counting)
    batch = [{"input_ids": [101, 5, 102], "attention_mask": [1, 1, 1]},
             {"input_ids": [101, 102], "attention_mask": [1, 1]}]
    with fastcollate.patch_transformers(tokenizer_pad=True):
        for return_tensors in ("pt", "np"):
            bert_tokenizer.pad(batch, return_tensors=return_tensors)
        bert_tokenizer.pad([{k: torch.tensor(v) for k, v in row.items()} for row in batch])
        bert_tokenizer.pad({"input_ids": [[1, 2], [3]]}, return_tensors="pt")
        assert len(calls) == 4
        # Handed to transformers without trying: Python output, a single example, TensorFlow.
        bert_tokenizer.pad(batch)
        bert_tokenizer.pad(batch[0], return_tensors="pt")
        with pytest.raises(Exception):  # noqa: B017 - transformers' own error, whatever it is
            bert_tokenizer.pad(batch, return_tensors="tf")
        assert len(calls) == 4


def test_a_custom_collator_calling_tokenizer_pad_goes_through_fastcollate(bert_tokenizer,
                                                                          monkeypatch):
    """The case the option is for: a user's collator built on `tokenizer.pad`, unchanged."""
    calls = []

    def counting(*args, **kwargs):
        calls.append(1)
        return fastcollate.pad(*args, **kwargs)

    def collate(features):
        labels = torch.tensor([f.pop("label") for f in features])
        batch = bert_tokenizer.pad(features, return_tensors="pt")
        batch["labels"] = labels
        return batch

    texts = [f"sentence number {i} " * (1 + i % 5) for i in range(24)]
    dataset = [dict(bert_tokenizer(text), label=i % 2) for i, text in enumerate(texts)]

    def batches():
        loader = torch.utils.data.DataLoader(copy.deepcopy(dataset), batch_size=8,
                                             collate_fn=collate)
        return list(loader)

    expected = batches()
    monkeypatch.setattr(routed, "fastcollate_pad", counting)
    with fastcollate.patch_transformers(tokenizer_pad=True):
        got = batches()
    assert len(calls) == len(expected) == 3
    for ours, theirs in zip(got, expected, strict=True):
        same(ours, theirs)


def test_tokenizers_that_pad_their_own_way_keep_their_method(bert_tokenizer, monkeypatch):
    calls = []
    monkeypatch.setattr(routed, "fastcollate_pad", lambda *a, **k: calls.append(1))

    class OwnPadding(type(bert_tokenizer)):
        def _pad(self, encoded_inputs, *args, **kwargs):
            out = super()._pad(encoded_inputs, *args, **kwargs)
            out["bbox"] = [0] * len(out["input_ids"])
            return out

    tokenizer = copy.deepcopy(bert_tokenizer)
    tokenizer.__class__ = OwnPadding
    batch = [{"input_ids": [1, 2, 3]}, {"input_ids": [4]}]
    expected = ORIGINAL_PAD(tokenizer, copy.deepcopy(batch), return_tensors="pt")
    with fastcollate.patch_transformers(tokenizer_pad=True):
        got = tokenizer.pad(copy.deepcopy(batch), return_tensors="pt")
    assert not calls
    same(got, expected)
    assert "bbox" in got


def test_unpatch_restores_the_method(bert_tokenizer):
    before = vars(PreTrainedTokenizerBase)["pad"]
    handle = fastcollate.patch_transformers(tokenizer_pad=True)
    assert vars(PreTrainedTokenizerBase)["pad"] is routed.tokenizer_pad
    assert "PreTrainedTokenizerBase.pad" in repr(handle)
    fastcollate.unpatch_transformers()
    assert vars(PreTrainedTokenizerBase)["pad"] is before
    for cls in type(bert_tokenizer).__mro__:
        if cls is not PreTrainedTokenizerBase:
            assert "pad" not in vars(cls) or cls.__module__.startswith("transformers.models")


def test_off_by_default():
    with fastcollate.patch_transformers():
        assert PreTrainedTokenizerBase.pad is ORIGINAL_PAD
    assert transformers.PreTrainedTokenizerBase.pad is ORIGINAL_PAD
