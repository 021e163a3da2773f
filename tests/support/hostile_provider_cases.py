"""The output-buffer provider and torch-function-mode cases that
tests/collators/test_hostile_providers.py runs in child processes (a crash would kill pytest):
pytest collects this module only when it is named on the command line, as `test_each_route`
names it, so a plain run holds no placeholder for them.

Every case gets either the batch the rows held when the call began or a ValueError naming the
key, and never a write into freed or read-only memory. `FASTCOLLATE_DLPACK_EXCHANGE=0` (set by
the parent for one route) turns torch's DLPack exchange table off: then no buffer is asked for
and every output is fastcollate's own."""

from __future__ import annotations

import os
import re

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastcollate
from tests.support.hostile import (
    ACTIONS,
    FakeStorage,
    HostileProvider,
    LyingStorage,
    MoveOnEveryCall,
    RowDict,
    collate,
    make_rows,
    read_only_view,
    remove_maps,
    same_batch,
    snapshot,
)
from tests.support.hypothesis_profiles import examples

TABLE = os.environ.get("FASTCOLLATE_DLPACK_EXCHANGE") != "0"
KEY_NAMED = re.compile(r"'(input_ids|token_type_ids|attention_mask|label)'")


@pytest.fixture(autouse=True)
def _maps():
    yield
    remove_maps()


def _expected(rows, left=False):
    try:
        return collate(snapshot(rows), left=left)
    except (ValueError, TypeError):
        return None


@settings(max_examples=examples(40), deadline=None, suppress_health_check=list(HealthCheck))
@given(
    kind=st.sampled_from(["list", "tuple", "numpy", "torch"]),
    label=st.sampled_from(["none", "int", "float", "tensor"]),
    subclass=st.booleans(),
    lengths=st.lists(st.integers(1, 5), min_size=1, max_size=4),
    left=st.booleans(),
    actions=st.lists(st.sampled_from(ACTIONS), max_size=5),
)
def test_hostile_providers_get_the_batch_or_an_error_naming_the_key(
    kind, label, subclass, lengths, left, actions
):
    rows = make_rows(kind, lengths, label, subclass)
    expected = _expected(rows, left)
    provider = HostileProvider(actions, rows)
    try:
        batch = collate(rows, provider, left=left)
    except (ValueError, TypeError) as err:
        assert TABLE, f"no provider runs without the exchange table: {err}"
        assert KEY_NAMED.search(str(err)), str(err)
        return
    assert expected is not None
    # The rows as they were when the call began, whatever the provider did to them since.
    assert same_batch(batch, expected), (actions, batch, expected)
    if TABLE:
        for value in batch.values():
            assert any(value is made for made in provider.made)


@pytest.mark.parametrize("kind", ["list", "numpy", "torch"])
@pytest.mark.parametrize("subclass", [False, True])
def test_a_provider_that_appends_rows_changes_no_row_count(kind, subclass):
    rows = make_rows(kind, [3, 1], "int", subclass)
    expected = collate(snapshot(rows))
    batch = collate(rows, HostileProvider(["append_row", "append_row", "append_row"], rows))
    assert len(rows) == (5 if TABLE else 2)
    assert same_batch(batch, expected)
    assert {value.shape[0] for value in batch.values()} == {2}


@pytest.mark.filterwarnings("ignore:The given NumPy array is not writable")
@pytest.mark.parametrize("lie", ["patched_method", "patched_storage", "mode"])
@pytest.mark.parametrize("subclass", [False, True])
def test_a_read_only_map_is_refused_whatever_python_answers(lie, subclass, monkeypatch):
    rows = make_rows("list", [3, 2], "int", subclass)

    def provider(key, shape, dtype):
        return read_only_view(shape, dtype)

    if lie == "patched_method":
        monkeypatch.setattr(torch.Tensor, "untyped_storage", lambda self: FakeStorage())
    elif lie == "patched_storage":
        monkeypatch.setattr(torch.UntypedStorage, "resizable", lambda self: True)
    if not TABLE:
        assert same_batch(collate(rows, provider), collate(snapshot(rows)))
        return
    if lie == "mode":
        with LyingStorage(), pytest.raises(ValueError, match=r"'input_ids'.*did not allocate"):
            collate(rows, provider)
    else:
        with pytest.raises(ValueError, match=r"'input_ids'.*did not allocate"):
            collate(rows, provider)


@pytest.mark.parametrize("kind", ["list", "numpy", "torch"])
@pytest.mark.parametrize("subclass", [False, True])
def test_a_mode_that_moves_every_buffer_on_each_torch_call(kind, subclass):
    rows = make_rows(kind, [4, 2, 3], "tensor", subclass)
    expected = collate(snapshot(rows))
    made: list = []

    def provider(key, shape, dtype):
        tensor = torch.empty(shape, dtype=getattr(torch, dtype))
        made.append(tensor)
        return tensor

    with MoveOnEveryCall(made):
        batch = collate(rows, provider)
    assert same_batch(batch, expected)


def _pinned_here(monkeypatch, make=None):
    """`pin_memory=True` on this machine: CUDA reported present, buffers in ordinary memory
    (or `make`'s), each recorded."""
    from fastcollate._internal import tensors

    made: list = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(tensors.PinnedOutputBuffers, "pin_memory", False)
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self: self.clone())
    original = tensors.PinnedOutputBuffers.__call__

    def call(self, key, shape, dtype):
        tensor = original(self, key, shape, dtype) if make is None else make(shape, dtype)
        made.append(tensor)
        return tensor

    monkeypatch.setattr(tensors.PinnedOutputBuffers, "__call__", call)
    return made


def _public_rows(subclass):
    rows = [{"input_ids": [101, 7, 8, 102], "label": 1}, {"input_ids": [101, 9, 102], "label": 0}]
    return [RowDict(row) if subclass else row for row in rows]


@pytest.mark.parametrize("subclass", [False, True])
def test_public_pad_with_pinned_memory_under_a_mode_that_moves_buffers(subclass, monkeypatch):
    expected = fastcollate.pad(_public_rows(subclass), pad_token_id=0, return_tensors="pt")
    made = _pinned_here(monkeypatch)
    rows = _public_rows(subclass)
    with MoveOnEveryCall(made):
        batch = fastcollate.pad(rows, pad_token_id=0, return_tensors="pt", pin_memory=True)
    assert list(batch) == list(expected)
    for key, value in expected.items():
        assert torch.equal(batch[key], value) and batch[key].dtype == value.dtype, key


@pytest.mark.filterwarnings("ignore:The given NumPy array is not writable")
@pytest.mark.parametrize("subclass", [False, True])
def test_public_pad_with_pinned_memory_refuses_a_read_only_map_a_mode_vouches_for(
    subclass, monkeypatch
):
    _pinned_here(monkeypatch, make=lambda shape, dtype: read_only_view(shape, dtype))
    rows = _public_rows(subclass)
    if not TABLE:
        batch = fastcollate.pad(rows, pad_token_id=0, return_tensors="pt", pin_memory=True)
        assert batch["input_ids"].shape == (2, 4)
        return
    with LyingStorage(), pytest.raises(ValueError, match=r"'input_ids'.*did not allocate"):
        fastcollate.pad(rows, pad_token_id=0, return_tensors="pt", pin_memory=True)


@pytest.mark.filterwarnings("ignore:The given NumPy array is not writable")
@pytest.mark.parametrize("action, refused", [
    ("free_earlier", r"'input_ids'.*shape"),
    ("set_earlier_read_only", r"'input_ids'.*did not allocate"),
    ("resize_earlier", None),
])
def test_a_buffer_changed_by_a_later_provider_call(action, refused):
    rows = make_rows("list", [3, 2], "int", False)
    expected = collate(snapshot(rows))
    provider = HostileProvider(["honest", action], rows)
    if TABLE and refused is not None:
        with pytest.raises(ValueError, match=refused):
            collate(rows, provider)
    else:
        assert same_batch(collate(rows, provider), expected)
