"""The output buffers are allocated once in Rust and shared with numpy and torch, not copied."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

import fastcollate
from fastcollate import _native
from fastcollate._internal.tensors import convert

pytestmark = pytest.mark.parity


def is_rust_buffer(base: object) -> bool:
    """The array's base is the capsule that owns the Rust Vec (and frees it with the array)."""
    return type(base).__name__ == "PyCapsule" and '"fastcollate.buffer"' in repr(base)


def test_numpy_arrays_are_views_of_rust_buffers():
    out = _native.collate(
        [{"input_ids": [1, 2, 3]}, {"input_ids": [4]}],
        [_native.PadGroup("input_ids", pad_value=0, attention_mask="attention_mask")],
        float32=True,
    )
    for array in out.values():
        assert isinstance(array, np.ndarray)
        assert not array.flags.owndata  # the memory belongs to the Rust Vec, not numpy
        assert is_rust_buffer(array.base)


def test_torch_tensors_share_the_rust_buffer():
    native = _native.collate(
        [{"input_ids": [1, 2, 3], "label": 1}, {"input_ids": [4], "label": 0}],
        [_native.PadGroup("input_ids", pad_value=0, attention_mask="attention_mask")],
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
        [_native.PadGroup("input_ids", pad_value=0, attention_mask="attention_mask")],
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
        [_native.PadGroup("input_ids", pad_value=0)],
        float32=True,
    )
    assert out["input_ids"].shape == (2, 0) and out["input_ids"].strides == (0, 0)


def _tensor_properties(tensor: torch.Tensor) -> dict:
    storage = tensor.untyped_storage()
    return {
        "dtype": tensor.dtype,
        "shape": tuple(tensor.shape),
        "stride": tensor.stride(),
        "storage_offset": tensor.storage_offset(),
        "contiguous": tensor.is_contiguous(),
        "device": tensor.device,
        "layout": tensor.layout,
        "requires_grad": tensor.requires_grad,
        "is_leaf": tensor.is_leaf,
        "is_view": tensor._base is not None,
        "inference": tensor.is_inference(),
        "shared": tensor.is_shared(),
        "storage_bytes": storage.nbytes(),
        "resizable": storage.resizable(),
        "values": tensor.tolist(),
    }


GROUP = _native.PadGroup("input_ids", pad_value=0, attention_mask="attention_mask")


@pytest.mark.parametrize(
    ("rows", "options"),
    [
        ([{"input_ids": [1, 2, 3], "label": 1}, {"input_ids": [4], "label": 0}], {}),
        ([{"input_ids": [5, 6], "score": 0.5}], {"float32": True}),
        ([{"input_ids": [5, 6], "score": 0.25}], {"float32": False}),
        ([{"input_ids": [5], "flag": True}, {"input_ids": [7, 8], "flag": False}], {}),
        ([{"input_ids": [1, 2], "mask": [1, 0]}], {"dtypes": {"mask": "bool"}}),
        ([{"input_ids": [], "label": 3}, {"input_ids": [], "label": 4}], {}),
    ],
    ids=["int64", "float32", "float64", "bool scalars", "bool matrix", "no columns"],
)
def test_torch_outputs_are_what_from_numpy_gives_for_the_same_buffer(rows, options):
    # Under `to_tensor=torch.from_numpy` the native call makes each tensor straight from its
    # buffer (DLPack's exchange table); any other callable gets the numpy array. Both must
    # give tensors alike in every property a caller can see.
    options = {"float32": True, **options}
    direct = _native.collate(rows, [GROUP], to_tensor=torch.from_numpy, **options)
    through_numpy = _native.collate(
        rows, [GROUP], to_tensor=lambda array: torch.from_numpy(array), **options
    )
    assert list(direct) == list(through_numpy)
    for key, tensor in direct.items():
        assert isinstance(tensor, torch.Tensor), key
        assert _tensor_properties(tensor) == _tensor_properties(through_numpy[key]), key
        # Writable, as from_numpy's tensors of a writable array are, and the memory is the
        # tensor's own: a write shows through numpy() and nothing else changes.
        if tensor.numel() and tensor.dtype != torch.bool:
            tensor += 1
            assert np.shares_memory(tensor.numpy(), tensor.numpy())
            assert tensor.tolist() == (through_numpy[key] + 1).tolist()


def test_torch_outputs_free_their_buffers():
    # Each tensor frees its Rust buffer when it dies: 150 batches of a 4M-value (32 MB)
    # output, dropped one by one, must not pile up (they would take 4.8 GB).
    script = """
import resource, torch
from fastcollate import _native
rows = [{"input_ids": [7] * 4_000_000}]
group = _native.PadGroup("input_ids", pad_value=0)
_native.collate(rows, [group], float32=True, to_tensor=torch.from_numpy)
start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
for _ in range(150):
    batch = _native.collate(rows, [group], float32=True, to_tensor=torch.from_numpy)
    assert batch["input_ids"].shape == (1, 4_000_000)
    del batch
grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - start) / 1024
print(grown_mb)
assert grown_mb < 500, grown_mb
"""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("return_tensors", ["pt", "np"])
def test_outputs_cannot_be_resized_in_place(return_tensors):
    # docs/differences.md: the outputs are the Rust buffers, which neither torch nor numpy may
    # reallocate; transformers' own outputs can be, and a copy of fastcollate's can.
    rows = [{"input_ids": [1, 2, 3]}, {"input_ids": [4]}]
    import transformers  # noqa: F401 - transformers' outputs, for the contrast

    ours = fastcollate.pad(rows, pad_token_id=0, return_tensors=return_tensors)["input_ids"]
    theirs = (
        torch.tensor([[1, 2, 3], [4, 0, 0]])
        if return_tensors == "pt"
        else np.array([[1, 2, 3], [4, 0, 0]])
    )

    def resize(value):
        if return_tensors == "pt":
            value.resize_(10, 10)
        else:
            value.resize((10, 10), refcheck=False)
        return value

    assert resize(theirs).shape == (10, 10)
    error, message = (
        (RuntimeError, "not resizable") if return_tensors == "pt"
        else (ValueError, "does not own its data")
    )
    copy = ours.clone() if return_tensors == "pt" else ours.copy()
    with pytest.raises(error, match=message):
        resize(ours)
    assert resize(copy).shape == (10, 10)
    assert np.asarray(copy).reshape(-1)[:6].tolist() == [1, 2, 3, 4, 0, 0]
