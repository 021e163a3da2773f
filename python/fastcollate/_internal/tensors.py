"""Turning the native module's numpy buffers into what the caller asked for.

"np" hands the arrays over as they are; "pt" wraps them with ``torch.from_numpy``, which shares
the Rust-allocated buffer (no copy); ``None`` gives Python lists, as ``tokenizer.pad`` does.
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Mapping
from typing import Any

import numpy as np

from .extras import install_command, why_not
from .upstream import BATCH_ENCODING_ENCODINGS, BATCH_ENCODING_N_SEQUENCES

RETURN_TENSORS = (None, "np", "pt")


def check_return_tensors(return_tensors: Any) -> str | None:
    """Accepts None, "np", "pt" and transformers' TensorType members."""
    if return_tensors is None or type(return_tensors) is str:
        # No attribute lookup for plain strings: a missing attribute costs an exception.
        value = return_tensors
    else:
        value = getattr(return_tensors, "value", return_tensors)
    if value not in RETURN_TENSORS:
        raise ValueError(
            f"return_tensors={return_tensors!r} is not supported; use None, 'np' or 'pt'"
        )
    return value


def output_kind(return_tensors: str | None) -> str:
    """What `return_tensors` makes, in words, for messages: "pt" a torch tensor, "np" a numpy
    array."""
    return "a torch tensor" if return_tensors == "pt" else "a numpy array"


def torch_module() -> Any:
    torch = sys.modules.get("torch")
    if torch is not None:
        return torch  # a dict lookup: cheaper than an import statement, on every batch
    try:
        import torch
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            f"return_tensors='pt' needs PyTorch. {why_not('torch', err)} "
            f"Install it with: {install_command('torch')}."
        ) from err
    return torch


def floats_as_float32(return_tensors: str | None) -> bool:
    """Whether Python floats become float32 (not float64) in a `return_tensors` batch, as
    tokenizer.pad's `torch.tensor` / `np.array` make them: under "pt" torch's default dtype
    (float32 unless `torch.set_default_dtype` changed it), float64 otherwise."""
    if return_tensors != "pt":
        return False
    torch = sys.modules.get("torch")
    return torch is None or torch.get_default_dtype() is not torch.float64


def is_torch_tensor(value: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def raw_to_tensor(key: str, values: list[Any], return_tensors: str | None) -> Any:
    """Values the native module left as Python objects (strings, nested lists, numpy scalars
    of their own dtype, ...): converted as transformers converts them, except that ragged data
    raises instead of building an object array."""
    if return_tensors is None:
        return values
    try:
        array = _stacked(values, return_tensors)
    except (ValueError, TypeError, RuntimeError) as err:
        text = text_error(key, values, return_tensors)
        if text is not None:
            raise text from None
        row = _first_failing_row(values, _stacked, return_tensors)
        raise ValueError(
            f"cannot make {output_kind(return_tensors)} of '{key}': its rows are ragged or not "
            f"numbers ('{key}' in row {row} is the first that does not fit: {err}); pad this "
            "key, drop it from the features, or use return_tensors=None"
        ) from err
    if return_tensors == "np" and array.dtype == object:
        row = _first_failing_row(values, _stacked, return_tensors)
        raise ValueError(
            f"cannot make a numpy array of '{key}': its rows have different shapes or are not "
            f"numbers ('{key}' in row {row} is the first that does not fit)"
        )
    return array


def is_text(value: Any) -> bool:
    """Whether a row's value is text (a string, or a sequence / array of strings), which no
    tensor can hold."""
    if isinstance(value, (str, bytes)):
        return True
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "USO" and value.size > 0 and is_text(value.flat[0])
    if isinstance(value, (list, tuple)) and value:
        return is_text(value[0])
    return False


def text_error(key: str, values: list[Any], return_tensors: str | None) -> ValueError | None:
    """The error for a key whose rows hold text, saying what to do (labels: map them to integer
    ids), or None when no row holds text."""
    for row, value in enumerate(values):
        if is_text(value) and key.endswith("input_ids"):
            return ValueError(
                f"cannot make {output_kind(return_tensors)} of '{key}': '{key}' in row {row} "
                f"holds text ({value!r:.60}), not token ids; tokenize first (the tokenizer's "
                "output holds the ids)"
            )
        if is_text(value):
            return ValueError(
                f"cannot make {output_kind(return_tensors)} of '{key}': '{key}' in row {row} is "
                f"text ({value!r:.60}), and tensors hold numbers. If these are class labels, map "
                "them to integer ids first (a label2id dict, or datasets' "
                "Dataset.class_encode_column, which makes the column a ClassLabel); otherwise "
                "leave the key out of the rows."
            )
    return None


def _stacked(values: list[Any], return_tensors: str) -> Any:
    if return_tensors == "pt":
        torch = torch_module()
        if values and isinstance(values[0], np.ndarray):
            return torch.from_numpy(np.stack(values))
        if values and isinstance(values[0], torch.Tensor):
            return torch.stack(values)
        return torch.tensor(values)
    if values and isinstance(values[0], np.ndarray):
        return np.stack(values)
    return np.asarray(values)


def _first_failing_row(values: list[Any], stack: Any, return_tensors: str) -> int:
    """The first row whose value, with the rows before it, no longer makes a tensor with
    `stack` (or makes an object array): the row to name in an error, looked for only once the
    whole key failed."""
    for row in range(len(values)):
        try:
            built = stack(values[: row + 1], return_tensors)
        except (ValueError, TypeError, RuntimeError):
            return row
        if return_tensors == "np" and built.dtype == object:
            return row
    return 0


def as_batch_encoding_tensor(key: str, values: list[Any], return_tensors: str | None) -> Any:
    """`BatchEncoding(..., tensor_type=return_tensors)`'s conversion of one key's values (numpy
    / torch values that tokenizer.pad left unconverted): stacked with their own dtypes."""
    if return_tensors is None:
        return values
    try:
        array = _stacked_as_batch_encoding(values, return_tensors)
    except (ValueError, TypeError, RuntimeError) as err:
        text = text_error(key, values, return_tensors)
        if text is not None:
            raise text from None
        row = _first_failing_row(values, _stacked_as_batch_encoding, return_tensors)
        raise ValueError(
            f"cannot make {output_kind(return_tensors)} of '{key}': '{key}' in row {row} is the "
            f"first that does not fit ({err})"
        ) from err
    if return_tensors == "np" and array.dtype == object:
        row = _first_failing_row(values, _stacked_as_batch_encoding, return_tensors)
        raise ValueError(
            f"cannot make a numpy array of '{key}': its rows have different shapes or are not "
            f"numbers ('{key}' in row {row} is the first that does not fit)"
        )
    return array


def _stacked_as_batch_encoding(values: list[Any], return_tensors: str) -> Any:
    if return_tensors == "pt":
        torch = torch_module()
        if isinstance(values[0], np.ndarray):
            return torch.from_numpy(np.array(values))
        return torch.tensor(values)
    return np.asarray(values)


def convert(
    batch: Mapping[str, Any],
    return_tensors: str | None,
    stacked_as_batch_encoding: Collection[str] = (),
) -> dict[str, Any]:
    """Native output -> the requested format. The native module gives numpy arrays, and lists
    for keys it left as Python objects (and, with return_tensors=None, for ragged rows); those
    named in `stacked_as_batch_encoding` are converted by `as_batch_encoding_tensor`."""
    out: dict[str, Any] = {}
    if return_tensors == "pt":
        from_numpy = torch_module().from_numpy
        for key, value in batch.items():
            if isinstance(value, np.ndarray):
                out[key] = from_numpy(value)
            elif type(value) is not list:
                out[key] = value  # a tensor already (the native module's `to_tensor`)
            elif key in stacked_as_batch_encoding:
                out[key] = as_batch_encoding_tensor(key, value, "pt")
            else:
                out[key] = raw_to_tensor(key, value, "pt")
    elif return_tensors == "np":
        for key, value in batch.items():
            if isinstance(value, np.ndarray):
                out[key] = value
            elif key in stacked_as_batch_encoding:
                out[key] = as_batch_encoding_tensor(key, value, "np")
            else:
                out[key] = raw_to_tensor(key, value, "np")
    else:
        for key, value in batch.items():
            out[key] = value.tolist() if isinstance(value, np.ndarray) else value
    return out


def check_pin_memory(pin_memory: bool, return_tensors: str | None) -> None:
    """Raises unless `pin_memory=True` can be honoured: torch tensors out ("pt") and CUDA present
    (page-locked memory is CUDA's; pinning without it has nothing to pin for)."""
    if not pin_memory:
        return
    if return_tensors != "pt":
        raise ValueError(
            f"pin_memory=True needs return_tensors='pt' (pinned memory holds torch tensors), "
            f"not {return_tensors!r}"
        )
    if not torch_module().cuda.is_available():
        raise RuntimeError(
            "pin_memory=True needs CUDA: torch.cuda.is_available() is False here, so there is "
            "no page-locked memory to fill and no device to copy to; leave pin_memory=False"
        )


class PinnedOutputBuffers:
    """The output buffers of `pin_memory=True`: called by the native module as
    `(key, shape, dtype) -> tensor` once each output's size is known, it returns an empty
    tensor in page-locked memory (`torch.empty(..., pin_memory=True)`), which the native module
    fills in place and returns as that output: no copy after padding. `addresses` holds the
    data pointers it handed out, for `pin_tensors` to leave alone."""

    # Page-locked memory; the tests set False to check the same path on machines without CUDA.
    pin_memory = True

    def __init__(self) -> None:
        self.addresses: set[int] = set()
        self._torch = torch_module()

    def __call__(self, key: str, shape: tuple[int, ...], dtype: str) -> Any:
        torch = self._torch
        tensor = torch.empty(shape, dtype=getattr(torch, dtype), pin_memory=self.pin_memory)
        self.addresses.add(tensor.data_ptr())
        return tensor


def refuse_pinning_in_worker() -> None:
    """Raises in a DataLoader worker, where a pinned batch cannot stay pinned."""
    from torch.utils.data import get_worker_info

    if get_worker_info() is not None:
        # A worker's batch is moved to shared memory on its way to the main process, which
        # drops the pinning (and a forked worker cannot start CUDA).
        raise RuntimeError(
            "pin_memory=True cannot pin in a DataLoader worker (num_workers > 0): the batch "
            "leaves the worker through shared memory, unpinned; use "
            "DataLoader(pin_memory=True) there instead"
        )


def pin_tensors(batch: dict[str, Any], filled: PinnedOutputBuffers | None = None) -> None:
    """Replaces every torch tensor of `batch` with a copy in page-locked host memory (torch's
    pinned allocator), so `.to("cuda", non_blocking=True)` copies asynchronously — except the
    tensors `filled` made (pinned already: the native module copied its outputs into them). The
    copy is the one `DataLoader(pin_memory=True)` makes, done by the collator instead; it is
    left for the outputs the native module does not fill (keys converted in Python, a torch
    without the DLPack exchange table)."""
    torch = torch_module()
    refuse_pinning_in_worker()
    addresses = filled.addresses if filled is not None else ()
    for key, value in batch.items():
        if isinstance(value, torch.Tensor) and value.data_ptr() not in addresses:
            batch[key] = value.pin_memory()


_BATCH_ENCODING: list[tuple[Any, dict[str, Any], bool, Any] | None] = []
# What an empty BatchEncoding holds besides `data` in the transformers versions this knows: then
# its attributes are set one by one (no copy of a prototype dict to make).
_USUAL_ATTRIBUTES = {BATCH_ENCODING_ENCODINGS: None, BATCH_ENCODING_N_SEQUENCES: None}


def _batch_encoding_class() -> tuple[Any, dict[str, Any], bool, Any] | None:
    """transformers' BatchEncoding, the attributes an empty one holds besides `data`, whether
    they are `_USUAL_ATTRIBUTES`, and what makes a bare one; None without transformers."""
    if not _BATCH_ENCODING:
        try:
            from transformers import BatchEncoding
        except ImportError:
            _BATCH_ENCODING.append(None)
        else:
            attributes = dict(vars(BatchEncoding()))
            attributes.pop("data", None)
            new = BatchEncoding.__new__  # looked up once, not on every call
            usual = attributes == _USUAL_ATTRIBUTES
            _BATCH_ENCODING.append((BatchEncoding, attributes, usual, new))
    return _BATCH_ENCODING[0]


def batch_encoding_parts() -> tuple[type, dict[str, Any]] | None:
    """transformers' BatchEncoding and the attributes an empty one holds besides `data`: what
    the native module's call plan sets on the bare instance it makes (see `batch_encoding`);
    None without transformers."""
    found = _BATCH_ENCODING[0] if _BATCH_ENCODING else _batch_encoding_class()
    if found is None:
        return None
    return found[0], dict(found[1])


def batch_encoding(data: dict[str, Any]) -> Any:
    """A transformers.BatchEncoding (so `.to(device)` works) when transformers is installed,
    else the plain dict."""
    found = _BATCH_ENCODING[0] if _BATCH_ENCODING else _batch_encoding_class()
    if found is None:
        return data
    cls, attributes, usual, new = found
    # What `BatchEncoding()` then `.data = data` gives (an empty one's attributes, `data` as
    # its store), without running its __init__: that, and filling it key by key through
    # UserDict's Python-level __setitem__, cost more than the rest of a small batch's Python
    # work.
    encoding = new(cls)
    if usual:
        store = encoding.__dict__
        store["data"] = data
        store[BATCH_ENCODING_ENCODINGS] = None
        store[BATCH_ENCODING_N_SEQUENCES] = None
    else:
        attributes = attributes.copy()
        attributes["data"] = data
        encoding.__dict__ = attributes
    return encoding
