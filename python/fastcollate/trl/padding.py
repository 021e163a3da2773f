"""TRL's `pad` helper (`trl.trainer.utils.pad`), and `pad_with_mask`: the list-of-token-ids form
GRPO and RLOO use it in (ids and their mask, padded left for prompts and right for
completions), in one native call that writes the lists straight into the padded matrix."""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any

import numpy as np
import torch

from .. import _native
from ..collators.padding_options import MAX_SIZE, checked_int, checked_pad_id

_SIDES = ("left", "right")
_MASK = "\0mask"
_IDS = "\0ids"


def _checked_side(padding_side: Any) -> bool:
    """Whether to pad on the left; anything but "left" or "right" is refused up front."""
    if padding_side not in _SIDES:
        raise ValueError(f"padding_side must be 'left' or 'right', not {padding_side!r}")
    left: bool = padding_side == "left"
    return left


def _checked_multiple(pad_to_multiple_of: Any) -> int | None:
    if pad_to_multiple_of is None:
        return None
    return checked_int("pad_to_multiple_of", pad_to_multiple_of, 1, MAX_SIZE)


def _rounded(length: int, multiple: int | None) -> int:
    return length if multiple is None else -(-length // multiple) * multiple


def pad(
    tensors: list[torch.Tensor],
    padding_value: int = 0,
    padding_side: str = "right",
    pad_to_multiple_of: int | None = None,
) -> torch.Tensor:
    """Same arguments and output as `trl.trainer.utils.pad` (TRL 1.16): the tensors stacked
    into one of shape `(len(tensors), *longest)`, every dimension padded to the batch's largest
    with `padding_value` — the first (sequence) dimension on `padding_side` and rounded up to
    `pad_to_multiple_of`, the others on the right — in the first tensor's dtype and on its
    device, with TRL's autograd behaviour (the output requires grad when a row does).

    1-d tensors of one dtype (token ids, masks, log-probabilities) are padded with a handful of
    torch calls on any device (one `torch.cat`, one `torch.full`, one `masked_scatter_`), and
    int64 ones on the CPU by one native call, instead of a copy per row; other batches
    (several dimensions, mixed dtypes or devices, tensor subclasses) row by row, with the same
    result. Unlike TRL, a bad `padding_side` is refused before anything is done, and an empty
    list, a value that is not a tensor, or tensors of different numbers of dimensions get a
    ValueError / TypeError naming the position.

    Under a torch function mode, the rows are read and padded with the mode off (as
    fastcollate's native reads are: docs/differences.md), so that what a mode reports or
    changes cannot reach the padding.
    """
    if torch._C._is_torch_function_mode_enabled():
        with torch._C.DisableTorchFunction():
            return _pad(tensors, padding_value, padding_side, pad_to_multiple_of)
    return _pad(tensors, padding_value, padding_side, pad_to_multiple_of)


def _pad(
    tensors: list[torch.Tensor],
    padding_value: int,
    padding_side: str,
    pad_to_multiple_of: int | None,
) -> torch.Tensor:
    left = _checked_side(padding_side)
    multiple = _checked_multiple(pad_to_multiple_of)
    if isinstance(tensors, torch.Tensor) or not isinstance(tensors, (list, tuple)):
        tensors = list(tensors)
    if not tensors:
        raise ValueError("pad needs at least one tensor; the list is empty")
    try:
        # One C-level pass: a batch of plain 1-d tensors of one dtype has a single kind.
        kinds = set(map(_KIND, tensors))
    except (AttributeError, TypeError, RuntimeError):
        kinds = set()  # not all tensors: the checks below name the culprit
    if len(kinds) == 1:
        kind, dtype, rank = kinds.pop()
        if kind is torch.Tensor and rank == 1:
            padded = _padded_vectors(tensors, dtype, padding_value, multiple, left)
            if padded is not None:
                return padded
    _check_tensors(tensors)
    return _padded_row_by_row(tensors, padding_value, multiple, left)


_KIND = attrgetter("__class__", "dtype", "ndim")
_NATIVE_KEY = "\0tensors"
# dtypes a CPU tensor shares with a numpy array (`Tensor.numpy()`), where numpy's boolean
# assignment is cheaper than torch's `masked_scatter_`.
_NUMPY_DTYPES = frozenset(
    (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)
    + (torch.float16, torch.float32, torch.float64)
)


def _padded_vectors(
    tensors: list[torch.Tensor],
    dtype: torch.dtype,
    padding_value: Any,
    multiple: int | None,
    left: bool,
) -> torch.Tensor | None:
    """1-d tensors of one dtype padded into a matrix, or None where torch refuses to
    concatenate them (different devices, sparse rows): the row-by-row path then does what TRL
    does with them."""
    if dtype is torch.int64 and type(padding_value) is int and -(2**63) <= padding_value < 2**63:
        padded = _natively_padded(tensors, padding_value, multiple, left)
        if padded is not None:
            return padded
    try:
        flat = torch.cat(tensors)
    except RuntimeError:
        return None
    if flat.layout is not torch.strided:
        return None
    # numel is a 1-d tensor's length, and a plain C method (a tensor's __len__ runs Python).
    lengths = np.fromiter(map(torch.Tensor.numel, tensors), np.int64, len(tensors))
    width = _rounded(int(lengths.max()), multiple)
    _check_size((len(tensors), width), dtype)
    # torch.full as TRL calls it: the same conversion of the pad value, the same refusals.
    output = torch.full((len(tensors), width), padding_value, dtype=dtype, device=flat.device)
    if width < 2**31:  # int32 compares are cheaper than int64 ones
        lengths = lengths.astype(np.int32)
    columns = np.arange(width, dtype=lengths.dtype)
    mask = columns >= (width - lengths)[:, None] if left else columns < lengths[:, None]
    # The mask's True cells in row-major order are the concatenation's values in order.
    if flat.is_cpu and dtype in _NUMPY_DTYPES and not flat.requires_grad:
        output.numpy()[mask] = flat.numpy()
    else:
        # An in-place copy into the fresh output keeps autograd's link to every row, as TRL's
        # row copies do.
        output.masked_scatter_(torch.from_numpy(mask).to(flat.device), flat)
    return output


def _natively_padded(
    tensors: list[torch.Tensor], padding_value: int, multiple: int | None, left: bool
) -> torch.Tensor | None:
    """int64 1-d tensors with the first on the CPU (so is the output) padded by the native
    collate path: one `torch.cat` viewed as numpy, the rows written into the padded matrix in
    Rust. int64 never requires grad, so there is no autograd link to keep. None where the
    native call refuses the batch (a row it cannot read, such as a meta tensor)."""
    if not tensors[0].is_cpu:
        return None
    group = _native.PadGroup(
        _NATIVE_KEY, pad_value=padding_value, pad_to_multiple_of=multiple, left=left
    )
    try:
        native = _native.collate(
            [{_NATIVE_KEY: tensor} for tensor in tensors],
            [group],
            float32=False,
            keys=[_NATIVE_KEY],
        )
    except (TypeError, ValueError, MemoryError):
        # An impossible size too: the caller's check raises it under the key "tensors".
        return None
    return torch.from_numpy(native[_NATIVE_KEY])


def _check_size(shape: tuple[int, ...], dtype: torch.dtype) -> None:
    """The one sizing rule (`_native.check_output_size`) on the padded output before torch
    allocates it: MemoryError past this machine's memory, whatever torch's allocator would do."""
    _native.check_output_size("tensors", shape, dtype.itemsize, str(dtype).removeprefix("torch."))


def _check_tensors(tensors: list[Any]) -> None:
    """Raise for the first value that is not a tensor or has another rank than the first."""
    first = tensors[0]
    for position, tensor in enumerate(tensors):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(
                f"tensors[{position}] is a {type(tensor).__name__}; pad takes torch tensors"
            )
        if tensor.dim() != first.dim():
            raise ValueError(
                f"tensors[{position}] has {tensor.dim()} dimensions but tensors[0] has "
                f"{first.dim()}; pad stacks tensors of the same rank"
            )
    if first.dim() == 0:
        raise ValueError("tensors[0] is 0-d; pad pads the first dimension of each tensor")


def _padded_row_by_row(
    tensors: list[torch.Tensor], padding_value: Any, multiple: int | None, left: bool
) -> torch.Tensor:
    """TRL's own way: a full output in the first tensor's dtype and device, each row copied
    into its place (cast and moved as `copy_` does)."""
    first = tensors[0]
    shape = [max(sizes) for sizes in zip(*(tensor.shape for tensor in tensors), strict=True)]
    shape[0] = _rounded(shape[0], multiple)
    _check_size((len(tensors), *shape), first.dtype)
    output = torch.full(
        (len(tensors), *shape), padding_value, dtype=first.dtype, device=first.device
    )
    for row, tensor in enumerate(tensors):
        start = shape[0] - tensor.shape[0] if left else 0
        region = (slice(start, start + tensor.shape[0]), *(slice(0, s) for s in tensor.shape[1:]))
        output[row][region] = tensor
    return output


def pad_with_mask(
    sequences: list[Any],
    padding_value: int = 0,
    padding_side: str = "right",
    pad_to_multiple_of: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Lists of token ids padded into one int64 tensor, with their attention mask: what TRL's
    GRPO and RLOO trainers build with four steps,

        ids = [torch.tensor(row) for row in sequences]
        mask = [torch.ones_like(row, dtype=torch.long) for row in ids]
        pad(ids, padding_value, padding_side, pad_to_multiple_of), pad(mask, 0, padding_side, ...)

    in one native call (prompts: `padding_side="left"`; completions: `"right"`). Same values,
    shapes and dtypes, except that an empty first row keeps the ids int64 (TRL's
    `torch.tensor([])` is float32, which would make the whole batch float32). Rows are lists
    or tuples of ints, as the trainers hold them; anything else (an array, whose dtype TRL would
    keep — use `pad` for tensors — floats, bools, a nested list) gets a TypeError naming the row.
    """
    left = _checked_side(padding_side)
    multiple = _checked_multiple(pad_to_multiple_of)
    padding_value = checked_pad_id("padding_value", padding_value)
    if isinstance(sequences, (str, bytes)) or not isinstance(sequences, (list, tuple)):
        raise TypeError("pad_with_mask takes a list of sequences of token ids")
    if not sequences:
        raise ValueError("pad_with_mask needs at least one sequence; the list is empty")
    # One native call: lists of ints are written straight into the padded matrix, anything
    # else read into a column and padded (or its bad row named).
    try:
        ids, mask = _native.pad_sequences(
            sequences, pad_id=padding_value, multiple=multiple, left=left
        )
    except (TypeError, ValueError):
        # The rows checked in Python, to name the first bad one as the docs say.
        for row, value in enumerate(sequences):
            if not isinstance(value, (list, tuple)):
                raise TypeError(
                    f"'sequences' in row {row} is a {type(value).__name__}; pad_with_mask "
                    "takes lists of token ids (pad takes tensors)"
                ) from None
        _find_bad_row(sequences, lambda row: f"'sequences' in row {row}")
        raise
    return torch.from_numpy(ids), torch.from_numpy(mask)


def padded_ids(
    sequences: list[Any],
    padding_value: int,
    multiple: int | None,
    left: bool,
    where: Callable[[int], str] = lambda row: f"'sequences' in row {row}",
) -> tuple[np.ndarray, np.ndarray]:
    """Integer sequences padded (int64) with their attention mask (int64), in one native call.
    `where(i)` says where sequence `i` came from ("'chosen_ids' in row 3"), for error messages."""
    return padded_columns([sequences], padding_value, multiple, left, lambda _, row: where(row))[0]


def padded_columns(
    columns: list[list[Any]],
    padding_value: int,
    multiple: int | None,
    left: bool,
    where: Callable[[int, int], str],
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Several columns of integer sequences (one per row each), each padded to its own longest
    with its attention mask, in one native call. `where(column, row)` names a sequence."""
    keys = [f"{_IDS}{index}" for index in range(len(columns))]
    groups = [
        _native.PadGroup(
            key,
            pad_value=padding_value,
            pad_to_multiple_of=multiple,
            left=left,
            attention_mask=f"{_MASK}{key}",
        )
        for key in keys
    ]
    try:
        # Rows of exact dicts take the reader's strict route (a mapping of lists does not).
        rows = [dict(zip(keys, values, strict=True)) for values in zip(*columns, strict=True)]
        native = _native.collate(rows, groups, float32=False, keys=keys)
    except (TypeError, ValueError) as error:
        for index, column in enumerate(columns):
            # mypy cannot infer a lambda with a default argument.
            _find_bad_row(column, lambda row, index=index: where(index, row))  # type: ignore[misc]
        raise _renamed(error, keys, where) from None
    padded = []
    for index, key in enumerate(keys):
        values = native[key]
        if values.dtype.kind not in "iu" or values.ndim != 2:
            _find_bad_row(
                columns[index], lambda row, index=index: where(index, row)  # type: ignore[misc]
            )
            raise TypeError(f"{where(index, 0)} holds {values.dtype} values; it must hold integers")
        padded.append((values, native[f"{_MASK}{key}"]))
    return padded


def _renamed(
    error: Exception, keys: list[str], where: Callable[[int, int], str]
) -> Exception:
    """`error` with the sequence it names (its `key` and `row`, set by the native module) said
    as `where` says it, in place of the internal key; unchanged when it names none."""
    key, row = getattr(error, "key", None), getattr(error, "row", None)
    if key not in keys or row is None:
        return error
    message = str(error)
    quoted = f"'{key}' in row {row}"
    if message.startswith(quoted):
        message = where(keys.index(key), row) + message[len(quoted) :]
    else:
        message = message.replace(f"'{key}'", where(keys.index(key), row))
    renamed = type(error)(message)
    renamed.key, renamed.row = key, row  # type: ignore[attr-defined]
    renamed.reason = getattr(error, "reason", None)  # type: ignore[attr-defined]
    return renamed


def _find_bad_row(sequences: list[Any], where: Callable[[int], str]) -> None:
    """Raise for the first sequence that is not a list or tuple of integers (the slow, exact
    check, run only after the native call has refused the batch)."""
    for row, value in enumerate(sequences):
        if isinstance(value, (np.ndarray, torch.Tensor)):
            continue  # the native call's own message names what is wrong with an array
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{where(row)} is a {type(value).__name__}; it must be a list of ints")
        for item in value:
            if isinstance(item, (np.ndarray, torch.Tensor)) and item.ndim == 0:
                try:
                    item = item.item()  # a 0-d value is read as its number (tokenizer.pad's)
                except (RuntimeError, NotImplementedError, ValueError, TypeError):
                    continue  # (meta tensors, ...) the native call's message says what failed
            if isinstance(item, (str, bytes)):
                raise TypeError(
                    f"{where(row)} holds text ({item!r}), not token ids; tokenize first"
                )
            if isinstance(item, (bool, np.bool_)) or not isinstance(item, (int, np.integer)):
                raise TypeError(
                    f"{where(row)} holds a {type(item).__name__} ({item!r}); it must hold integers"
                )
