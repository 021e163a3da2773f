"""The torch-function-mode cases that tests/collators/test_torch_function_modes.py runs in child
processes (a crash would kill pytest): pytest collects this module only when it is named on the
command line, as `test_each_route` names it, so a plain run holds no placeholder for them.

Every case must give exactly the result it gives outside the mode (and transformers' where
transformers is compared), and never crash."""

from __future__ import annotations

import copy
import importlib
import importlib.util

import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode

import fastcollate
from tests.support.torch_modes import LIES, Lie, Move

pytestmark = pytest.mark.parity


def tensor_rows(count: int, equal: bool = False, dtype=torch.int64) -> list:
    return [
        {
            "input_ids": torch.arange(1, 4 + (0 if equal else row % 3), dtype=dtype),
            "attention_mask": torch.ones(3 + (0 if equal else row % 3), dtype=dtype),
            "label": torch.tensor(row % 2),
        }
        for row in range(count)
    ]


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from tests.support.bundled_model import model_dir

    return AutoTokenizer.from_pretrained(model_dir())


def collators(tokenizer) -> dict:
    """Each entry: (fastcollate's call, transformers' call or None), taking rows as
    `tensor_rows` makes them."""
    import transformers

    def equal_rows(rows):
        return [{key: value[:3] if value.ndim else value for key, value in row.items()}
                for row in rows]

    def token_labels(rows):
        return [{"input_ids": row["input_ids"], "labels": row["input_ids"].clone()}
                for row in rows]

    def flat(rows):
        return [{"input_ids": row["input_ids"]} for row in rows]

    return {
        "pad_pt": (
            lambda rows: fastcollate.pad(rows, tokenizer, return_tensors="pt"),
            lambda rows: tokenizer.pad(rows, return_tensors="pt"),
        ),
        "pad_np": (
            lambda rows: fastcollate.pad(rows, pad_token_id=0, return_tensors="np"),
            None,
        ),
        "with_padding": (
            fastcollate.DataCollatorWithPadding(tokenizer),
            transformers.DataCollatorWithPadding(tokenizer),
        ),
        "default": (
            lambda rows: fastcollate.default_data_collator(equal_rows(rows)),
            lambda rows: transformers.default_data_collator(equal_rows(rows)),
        ),
        "token_classification": (
            lambda rows: fastcollate.DataCollatorForTokenClassification(tokenizer)(
                token_labels(rows)),
            lambda rows: transformers.DataCollatorForTokenClassification(tokenizer)(
                token_labels(rows)),
        ),
        "flattening": (
            lambda rows: fastcollate.DataCollatorWithFlattening()(flat(rows)),
            lambda rows: transformers.DataCollatorWithFlattening()(flat(rows)),
        ),
    }


def assert_same(ours, theirs, what):
    ours, theirs = dict(ours), dict(theirs)
    assert ours.keys() == theirs.keys(), what
    for key in ours:
        a, b = ours[key], theirs[key]
        if isinstance(b, torch.Tensor):
            assert isinstance(a, torch.Tensor), (what, key)
            assert (a.dtype, a.shape) == (b.dtype, b.shape), (what, key)
            assert torch.equal(a, b), (what, key, a, b)
        else:
            a, b = np.asarray(a), np.asarray(b)
            assert (a.dtype, a.shape) == (b.dtype, b.shape), (what, key)
            assert np.array_equal(a, b), (what, key, a, b)


# 2 rows are read tensor by tensor on both routes; 20 through one torch.cat without the table.
ROW_COUNTS = [2, 20]


@pytest.mark.parametrize("rows", ROW_COUNTS)
@pytest.mark.parametrize("lie", sorted(LIES))
def test_modes_that_lie(tokenizer, lie, rows):
    target, answer = LIES[lie]
    for name, (ours, theirs) in collators(tokenizer).items():
        expected = ours(tensor_rows(rows))
        if theirs is not None:
            assert_same(expected, theirs(tensor_rows(rows)), name)
        batch = tensor_rows(rows)
        with Lie(target, answer):
            got = ours(batch)
        assert_same(got, expected, (name, lie))
        for row, fresh in zip(batch, tensor_rows(rows), strict=True):
            for key, value in row.items():
                assert torch.equal(value, fresh[key]), (name, lie, "input changed")


@pytest.mark.parametrize("rows", ROW_COUNTS)
@pytest.mark.parametrize("how", ["resize", "set"])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_modes_that_move_rows_mid_call(tokenizer, how, rows, dtype):
    for name, (ours, _) in collators(tokenizer).items():
        expected = ours(tensor_rows(rows, dtype=dtype))
        batch = tensor_rows(rows, dtype=dtype)
        victims = [value for row in batch for value in row.values()]
        with Move(victims, how):
            got = ours(batch)
        assert_same(got, expected, (name, how))


def test_the_issues_use_after_free():
    # Issue 35's first repro: row 0's storage reallocated while row 1 is asked is_neg().
    a = torch.arange(1, 9)

    class Grow(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func is torch.Tensor.is_neg and args[0] is not a:
                with torch._C.DisableTorchFunction():
                    a.resize_(1 << 20)
            return func(*args, **(kwargs or {}))

    with Grow():
        out = fastcollate.pad([{"input_ids": a}, {"input_ids": torch.tensor([4])}],
                              pad_token_id=0, return_tensors="np")
    assert out["input_ids"].tolist() == [[1, 2, 3, 4, 5, 6, 7, 8], [4, 0, 0, 0, 0, 0, 0, 0]]


@pytest.mark.parametrize("lie", ["len", "data_ptr", "is_contiguous"])
def test_the_issues_segfault(lie):
    # Issue 35's second repro (and its two variants): a mode's answers built the slice.
    target, answer = LIES[lie]
    value = torch.tensor([7]).expand(3) if lie == "is_contiguous" else torch.tensor([7])
    expected = fastcollate.pad([{"input_ids": value}], pad_token_id=0, return_tensors="np")
    with Lie(target, answer):
        out = fastcollate.pad([{"input_ids": value}], pad_token_id=0, return_tensors="np")
    assert_same(out, expected, lie)


@pytest.mark.parametrize("rows", ROW_COUNTS)
@pytest.mark.parametrize("name", ["data_ptr", "is_neg", "is_contiguous", "dim", "numel"])
def test_methods_patched_onto_torch_tensor(tokenizer, monkeypatch, name, rows):
    # Not a mode: a Python method put on torch.Tensor itself, answering falsely.
    lies = {"data_ptr": 4096, "is_neg": False, "is_contiguous": True, "dim": 1,
            "numel": 1 << 26}
    expected = {key: ours(tensor_rows(rows)) for key, (ours, _) in collators(tokenizer).items()}
    monkeypatch.setattr(torch.Tensor, name, lambda self, *a, **k: lies[name])
    for key, (ours, _) in collators(tokenizer).items():
        assert_same(ours(tensor_rows(rows)), expected[key], (key, name))


def test_a_negated_view_is_read_with_its_negation():
    # A pending negation is what `is_neg()` reports; under a mode that denies it, still
    # applied (the mode is not asked).
    row = torch._neg_view(torch.tensor([-5, -6]))
    with Lie(torch.Tensor.is_neg, lambda: False):
        out = fastcollate.pad([{"input_ids": row}, {"input_ids": torch.tensor([1])}],
                              pad_token_id=0, return_tensors="np")
    assert out["input_ids"].tolist() == [[5, 6], [1, 0]]


def test_the_device_context_is_a_mode_too(tokenizer):
    # `with torch.device(...)` is a torch function mode: rows are read as without it.
    rows = tensor_rows(3)
    expected = fastcollate.pad(copy.deepcopy(rows), tokenizer, return_tensors="pt")
    with torch.device("cpu"):
        assert torch._C._is_torch_function_mode_enabled()
        out = fastcollate.pad(rows, tokenizer, return_tensors="pt")
    assert_same(out, expected, "device context")
    assert_same(out, tokenizer.pad(tensor_rows(3), return_tensors="pt"), "transformers")


def test_modes_are_back_on_after_the_call():
    seen = []

    class Watch(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    with Watch():
        fastcollate.pad(tensor_rows(2), pad_token_id=0, return_tensors="np")
        assert torch._C._is_torch_function_mode_enabled()
        seen.clear()
        torch.ones(1).sum()
    assert seen, "the mode no longer sees torch calls after fastcollate's"


def zero_d_rows() -> list:
    """Token lists of 0-d tensors (`list(torch.tensor(ids))`, issue 49), one row mixed with
    Python ints, beside a 0-d label."""
    return [
        {"input_ids": list(torch.tensor([101, 7, 102])), "label": torch.tensor(1)},
        {"input_ids": [101] + list(torch.tensor([8], dtype=torch.int32)), "label": torch.tensor(0)},
    ]


def zero_d_calls(tokenizer) -> dict:
    """Each token entry point's call; TRL's where TRL is installed (CPython 3.10's runs have
    none)."""
    calls = {
        "pad": lambda rows: fastcollate.pad(rows, tokenizer, return_tensors="pt"),
        "with_padding": fastcollate.DataCollatorWithPadding(tokenizer),
        "flattening": lambda rows: fastcollate.DataCollatorWithFlattening()(
            [{"input_ids": row["input_ids"]} for row in rows]),
    }
    if importlib.util.find_spec("trl") is not None:
        trl_collator = importlib.import_module("fastcollate.trl").DataCollatorForLanguageModeling
        calls["trl"] = lambda rows: trl_collator(0)(
            [{"input_ids": row["input_ids"]} for row in rows])
    return calls


@pytest.mark.parametrize("lie", sorted(LIES))
def test_zero_d_token_lists_under_modes_that_lie(tokenizer, lie):
    # Each 0-d item's rank and number are asked with modes off: a mode answering `dim()`,
    # `ndim`, `item()`, `tolist()`, ... falsely changes nothing.
    target, answer = LIES[lie]
    for name, call in zero_d_calls(tokenizer).items():
        expected = call(zero_d_rows())
        with Lie(target, answer):
            got = call(zero_d_rows())
        assert_same(got, expected, (name, lie))


@pytest.mark.parametrize("name", ["dim", "ndim", "numel"])
def test_zero_d_token_lists_under_methods_patched_onto_torch_tensor(tokenizer, monkeypatch,
                                                                    name):
    # A 0-d item's rank is read through TensorBase's own descriptor, not a patched method.
    expected = {key: call(zero_d_rows()) for key, call in zero_d_calls(tokenizer).items()}
    lie = property(lambda self: 1) if name == "ndim" else (lambda self, *a, **k: 1)
    monkeypatch.setattr(torch.Tensor, name, lie)
    for key, call in zero_d_calls(tokenizer).items():
        assert_same(call(zero_d_rows()), expected[key], (key, name))
