"""The output buffers are allocated once in Rust and shared with numpy and torch, not copied."""

from __future__ import annotations

import numpy as np
import torch

import fastcollate
from fastcollate import _native
from fastcollate._internal.tensors import convert


def test_numpy_arrays_are_views_of_rust_buffers():
    out = _native.collate(
        [{"input_ids": [1, 2, 3]}, {"input_ids": [4]}],
        [("input_ids", 0, "longest", None, None, False, [], "attention_mask")],
        float32=True,
    )
    for array in out.values():
        assert isinstance(array, np.ndarray)
        assert not array.flags.owndata  # the memory belongs to the Rust Vec, not numpy
        assert type(array.base).__name__ == "PySliceContainer"


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
        assert type(array.base).__name__ == "PySliceContainer", key
