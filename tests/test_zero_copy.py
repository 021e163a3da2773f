"""The output buffers are allocated once in Rust and shared with numpy and torch, not copied."""

from __future__ import annotations

import numpy as np
import torch

import fastcollate
from fastcollate import _native
from fastcollate._internal.tensors import convert


def is_rust_buffer(base: object) -> bool:
    """The array's base is the capsule that owns the Rust Vec (and frees it with the array)."""
    return type(base).__name__ == "PyCapsule" and '"fastcollate.buffer"' in repr(base)


def test_numpy_arrays_are_views_of_rust_buffers():
    out = _native.collate(
        [{"input_ids": [1, 2, 3]}, {"input_ids": [4]}],
        [("input_ids", 0, "longest", None, None, False, [], "attention_mask")],
        float32=True,
    )
    for array in out.values():
        assert isinstance(array, np.ndarray)
        assert not array.flags.owndata  # the memory belongs to the Rust Vec, not numpy
        assert is_rust_buffer(array.base)


def test_torch_tensors_share_the_rust_buffer():
    native = _native.collate(
        [{"input_ids": [1, 2, 3], "label": 1}, {"input_ids": [4], "label": 0}],
        [("input_ids", 0, "longest", None, None, False, [], "attention_mask")],
        float32=True,
    )
    pointers = {k: v.ctypes.data for k, v in native.items()}
    tensors = convert(native, "pt")
    for key, tensor in tensors.items():
        assert isinstance(tensor, torch.Tensor)
        assert tensor.data_ptr() == pointers[key], key


def test_public_numpy_output_is_the_rust_buffer(bert_tokenizer):
    batch = fastcollate.DataCollatorWithPadding(bert_tokenizer, return_tensors="np")(
        [{"input_ids": [101, 7, 102], "label": 1}, {"input_ids": [101, 102], "label": 0}]
    )
    for key, array in batch.items():
        assert is_rust_buffer(array.base), key


def test_arrays_are_writeable_c_ordered_and_outlive_the_batch():
    out = _native.collate(
        [{"input_ids": [1, 2, 3], "score": 0.5}, {"input_ids": [4], "score": 1.5}],
        [("input_ids", 0, "longest", None, None, False, [], "attention_mask")],
        float32=False,
    )
    ids, score = out["input_ids"], out["score"]
    for array in (ids, score, out["attention_mask"]):
        assert array.flags.writeable and array.flags.aligned and array.flags.c_contiguous
        assert not array.flags.owndata
    assert ids.strides == (24, 8) and score.strides == (8,)
    view = ids[1:, :2]
    del out, ids
    view[0, 1] = 9  # writes into the Rust buffer, still alive through the view's base chain
    assert view.tolist() == [[4, 9]]
    assert score.tolist() == [0.5, 1.5]


def test_an_empty_matrix_has_zero_strides_as_before():
    out = _native.collate(
        [{"input_ids": []}, {"input_ids": []}],
        [("input_ids", 0, "longest", None, None, False, [], None)],
        float32=True,
    )
    assert out["input_ids"].shape == (2, 0) and out["input_ids"].strides == (0, 0)
