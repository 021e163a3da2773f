"""Helpers that compare fastcollate's output with transformers', key by key."""

from __future__ import annotations

import numpy as np
import torch


def assert_same_value(key, ours, theirs):
    assert type(ours) is type(theirs), f"{key}: {type(ours)} != {type(theirs)}"
    if isinstance(theirs, torch.Tensor):
        assert ours.dtype == theirs.dtype, f"{key}: dtype {ours.dtype} != {theirs.dtype}"
        assert ours.shape == theirs.shape, f"{key}: shape {ours.shape} != {theirs.shape}"
        assert torch.equal(ours, theirs), f"{key}: {ours} != {theirs}"
    elif isinstance(theirs, np.ndarray):
        assert ours.dtype == theirs.dtype, f"{key}: dtype {ours.dtype} != {theirs.dtype}"
        assert ours.shape == theirs.shape, f"{key}: shape {ours.shape} != {theirs.shape}"
        np.testing.assert_array_equal(ours, theirs, err_msg=key)
    else:
        assert ours == theirs, f"{key}: {ours!r} != {theirs!r}"


def assert_same_batch(ours, theirs):
    assert type(ours) is type(theirs), f"container {type(ours)} != {type(theirs)}"
    assert list(ours.keys()) == list(theirs.keys()), f"{list(ours)} != {list(theirs)}"
    for key in theirs:
        assert_same_value(key, ours[key], theirs[key])


def has_object_array(batch) -> bool:
    return any(isinstance(v, np.ndarray) and v.dtype == object for v in batch.values())


def assert_unchanged(rows, before):
    """The caller's rows after a call equal the deep copy `before` taken ahead of it: same keys,
    value types, dtypes and values."""
    assert len(rows) == len(before)
    for row, old in zip(rows, before, strict=True):
        assert list(row) == list(old)
        for key, value in row.items():
            assert type(value) is type(old[key]), key
            if isinstance(value, (np.ndarray, torch.Tensor)):
                assert value.dtype == old[key].dtype, key
                assert np.array_equal(np.asarray(value), np.asarray(old[key])), key
            else:
                assert value == old[key], key


def to_format(values, fmt, dtype):
    """`values` as a list, a numpy array ("numpy") or a torch tensor ("torch") of `dtype`."""
    if fmt == "list":
        return list(values)
    array = np.asarray(values, dtype=dtype)
    return array if fmt == "numpy" else torch.from_numpy(array)
