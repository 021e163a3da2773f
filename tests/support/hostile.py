"""Hostile callers for the raw-memory rules (issue 39): output-buffer providers and torch
function modes that mutate, resize, free or lie, and threads that resize numpy rows while they
are padded. Shared by tests/collators/test_hostile_providers.py and
tests/collators/test_rows_resized_by_threads.py, which run these in child processes
(`python -m tests.support.hostile ...`) so that a crash fails a test instead of killing pytest.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import warnings
from typing import Any

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

import fastcollate

DTYPES = {"int64": torch.int64, "float32": torch.float32, "float64": torch.float64,
          "bool": torch.bool}

_MAPS: list[str] = []


def read_only_view(shape: tuple[int, ...], dtype: str) -> torch.Tensor:
    """A tensor over a read-only memory map (`np.memmap(mode="r")`): writing it is SIGSEGV."""
    count = int(np.prod(shape)) if shape else 1
    item = np.dtype(dtype).itemsize
    handle, path = tempfile.mkstemp(prefix="fastcollate-ro-")
    with os.fdopen(handle, "wb") as file:
        file.write(b"\0" * max(count * item, item))
    _MAPS.append(path)
    mapped = np.memmap(path, dtype=dtype, mode="r", shape=shape if count else (1,))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tensor = torch.from_numpy(mapped)
    return tensor if count else tensor[:0].reshape(shape)


def remove_maps() -> None:
    while _MAPS:
        try:
            os.unlink(_MAPS.pop())
        except OSError:
            pass


class FakeStorage:
    """What a lying `untyped_storage()` returns: says memory torch allocated."""

    def resizable(self) -> bool:
        return True

    def data_ptr(self) -> int:
        return 4096


class LyingStorage(TorchFunctionMode):
    """A mode answering `untyped_storage()` with a storage that says it is resizable."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") == "untyped_storage":
            return FakeStorage()
        return func(*args, **(kwargs or {}))


class MoveOnEveryCall(TorchFunctionMode):
    """On every torch call, moves each tensor in `victims` (grown, then shrunk back: new
    memory, the old freed and scribbled over)."""

    def __init__(self, victims: list[torch.Tensor]):
        super().__init__()
        self.victims = victims

    def __torch_function__(self, func, types, args=(), kwargs=None):
        with torch._C.DisableTorchFunction():
            for victim in list(self.victims):
                try:
                    shape = victim.shape
                    victim.resize_(1 << 16)
                    victim.resize_(shape)
                except RuntimeError:
                    pass
            _scribble = [torch.full((64 + k,), -777) for k in range(4)]
            del _scribble
        return func(*args, **(kwargs or {}))


ACTIONS = (
    "honest", "resize_earlier", "free_earlier", "set_earlier_read_only", "read_only",
    "wrong_dtype", "wrong_shape", "meta", "append_row", "pop_row", "mutate_row",
    "same_as_earlier", "view_of_earlier", "subclass", "raise",
)


class HostileProvider:
    """An output-buffer provider that does `actions[i]` on its i-th call (honest past the end)
    to the rows (`rows`, the list being collated) or to the buffers it gave before."""

    def __init__(self, actions: list[str], rows: list):
        self.actions = list(actions)
        self.rows = rows
        self.made: list[torch.Tensor] = []
        self.calls = 0

    def __call__(self, key: str, shape: tuple[int, ...], dtype: str) -> Any:
        action = self.actions[self.calls] if self.calls < len(self.actions) else "honest"
        self.calls += 1
        torch_dtype = DTYPES[dtype]
        earlier = self.made[-1] if self.made else None
        if action == "resize_earlier" and earlier is not None:
            shape_before = earlier.shape
            earlier.resize_(1 << 16)
            earlier.resize_(shape_before)
        elif action == "free_earlier" and earlier is not None:
            earlier.resize_(0)
        elif action == "set_earlier_read_only" and earlier is not None:
            view = read_only_view(tuple(earlier.shape), str(earlier.dtype).split(".")[1])
            earlier.set_(view.untyped_storage(), 0, earlier.shape, earlier.stride())
        elif action == "append_row" and self.rows:
            self.rows.append(dict(self.rows[0]))
        elif action == "pop_row" and self.rows:
            self.rows.pop()
        elif action == "mutate_row" and self.rows:
            for value in self.rows[0].values():
                if isinstance(value, list):
                    value.append(999)
                elif isinstance(value, np.ndarray) and value.flags.owndata:
                    value.resize(value.size + 7, refcheck=False)
                elif isinstance(value, torch.Tensor) and value.dim() == 1:
                    value.resize_(value.numel() + 7)
        if action == "read_only":
            tensor = read_only_view(shape, dtype)
        elif action == "wrong_dtype":
            tensor = torch.empty(shape, dtype=torch.float64 if dtype != "float64" else torch.int64)
        elif action == "wrong_shape":
            tensor = torch.empty((shape[0] + 1, *shape[1:]), dtype=torch_dtype)
        elif action == "meta":
            tensor = torch.empty(shape, dtype=torch_dtype, device="meta")
        elif action == "same_as_earlier" and earlier is not None:
            tensor = earlier
        elif action == "view_of_earlier" and earlier is not None and earlier.dtype == torch_dtype:
            tensor = earlier.reshape(-1)[: int(np.prod(shape))].reshape(shape)
        elif action == "subclass":
            tensor = torch.empty(shape, dtype=torch_dtype).as_subclass(Sub)
        elif action == "raise":
            raise RuntimeError("no buffer today")
        else:
            tensor = torch.empty(shape, dtype=torch_dtype)
        self.made.append(tensor)
        return tensor


class Sub(torch.Tensor):
    pass


class RowDict(dict):
    """A dict subclass: rows of the general route (its `__getitem__` is Python code)."""

    def __getitem__(self, key):
        return super().__getitem__(key)


def make_rows(kind: str, lengths: list[int], label: str, subclass: bool) -> list:
    def ids(n: int, start: int) -> Any:
        values = [start + i for i in range(n)]
        if kind == "list":
            return values
        if kind == "tuple":
            return tuple(values)
        array = np.asarray(values, dtype=np.int64)
        return array if kind == "numpy" else torch.from_numpy(array.copy())

    rows = []
    for row, n in enumerate(lengths):
        item: dict[str, Any] = {"input_ids": ids(n, 100 * row + 1),
                                "token_type_ids": ids(n, 0)}
        if label == "int":
            item["label"] = row % 3
        elif label == "float":
            item["label"] = row + 0.5
        elif label == "tensor":
            item["label"] = torch.tensor(row % 2)
        rows.append(RowDict(item) if subclass else item)
    return rows


def snapshot(rows: list) -> list:
    """A deep copy of `rows` (tensors cloned), to collate for the expected result."""
    out = []
    for row in rows:
        copied = {}
        for key, value in row.items():
            if isinstance(value, torch.Tensor):
                copied[key] = value.clone()
            elif isinstance(value, np.ndarray):
                copied[key] = value.copy()
            elif isinstance(value, list):
                copied[key] = list(value)
            else:
                copied[key] = value
        out.append(type(row)(copied))
    return out


GROUP_OPTIONS = dict(pad_value=0, followers=[("token_type_ids", 0, True)],
                     attention_mask="attention_mask")


def collate(rows: list, provider: Any = None, left: bool = False) -> dict:
    group = fastcollate._native.PadGroup("input_ids", left=left, **GROUP_OPTIONS)
    options = {} if provider is None else {"output_buffer": provider}
    return fastcollate._native.collate(rows, [group], float32=True, to_tensor=torch.from_numpy,
                                       **options)


def same_batch(ours: dict, expected: dict) -> bool:
    if list(ours) != list(expected):
        return False
    return all(
        isinstance(ours[k], torch.Tensor) and ours[k].dtype == expected[k].dtype
        and ours[k].shape == expected[k].shape and torch.equal(ours[k], expected[k])
        for k in expected
    )


# --- Rows resized by another thread while they are padded ---------------------------------


def _resizer(rows: list, key: str, stop: threading.Event) -> None:
    sizes = [3, 4000, 17, 20_000, 1]
    i = 0
    while not stop.is_set():
        for row in rows:
            array = row[key]
            try:
                array.resize(sizes[i % len(sizes)], refcheck=False)
            except ValueError:
                pass
            i += 1


def resized_by_threads(route: str, iterations: int) -> None:
    """Pads numpy rows `iterations` times while a thread resizes them in place
    (`ndarray.resize(..., refcheck=False)`, which frees the old memory): the feature-extractor
    padding (`route="frames"`) or the token padding (`"tokens"`). Errors are allowed (a row
    may be of a length that does not fit); a crash or abort is what the caller looks for."""
    sys.setswitchinterval(1e-5)
    if route == "frames":
        from transformers import Wav2Vec2FeatureExtractor

        extractor = Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=16000,
                                             padding_value=0.0, return_attention_mask=True)
        rows = [{"input_values": np.random.rand(200 + 37 * i).astype(np.float32)}
                for i in range(8)]
        key = "input_values"

        def call() -> Any:
            return fastcollate.pad(rows, extractor, return_tensors="np")
    else:
        rows = [{"input_ids": np.arange(50 + 11 * i, dtype=np.int64)} for i in range(8)]
        key = "input_ids"

        def call() -> Any:
            return fastcollate.pad(rows, pad_token_id=0, return_tensors="np")
    stop = threading.Event()
    thread = threading.Thread(target=_resizer, args=(rows, key, stop), daemon=True)
    thread.start()
    errors = 0
    try:
        for _ in range(iterations):
            try:
                call()
            except (ValueError, TypeError):
                errors += 1
    finally:
        stop.set()
        thread.join()
    print(f"ok {route} {iterations} iterations, {errors} refused")


if __name__ == "__main__":
    resized_by_threads(sys.argv[1], int(sys.argv[2]))
