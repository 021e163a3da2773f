"""TRL's `pad` helper (`trl.trainer.utils.pad`), and `pad_with_mask`: the list-of-token-ids form
GRPO and RLOO use it in (ids and their mask, padded left for prompts and right for
completions), in one native call that writes the lists straight into the padded matrix."""

from __future__ import annotations

import re
from collections.abc import Callable
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
    return padding_side == "left"


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
    device.

    1-d tensors of one dtype and device (token ids, masks, log-probabilities) are padded by
    torch's `pad_sequence` in one call instead of a copy per row; other batches (several
    dimensions, mixed dtypes, a pad value beyond 2**53) row by row, with the same result.
    Unlike TRL, a bad `padding_side` is refused before anything is done, and an empty list, a
    value that is not a tensor, or tensors of different numbers of dimensions get a ValueError /
    TypeError naming the position.
    """
    left = _checked_side(padding_side)
    multiple = _checked_multiple(pad_to_multiple_of)
    if isinstance(tensors, torch.Tensor) or not isinstance(tensors, (list, tuple)):
        tensors = list(tensors)
    if not tensors:
        raise ValueError("pad needs at least one tensor; the list is empty")
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
    shape = [max(sizes) for sizes in zip(*(tensor.shape for tensor in tensors), strict=True)]
    longest = shape[0]
    shape[0] = _rounded(longest, multiple)
    if (
        first.dim() == 1
        and _exact_as_float(padding_value)
        and all(
            tensor.dtype == first.dtype
            and tensor.device == first.device
            and tensor.layout == torch.strided
            for tensor in tensors
        )
    ):
        # A 0-d torch.full refuses a value the dtype cannot hold, as TRL's full-size one does.
        torch.full((), padding_value, dtype=first.dtype, device=first.device)
        padded = torch.nn.utils.rnn.pad_sequence(
            tensors, batch_first=True, padding_value=float(padding_value), padding_side=padding_side
        )
        if shape[0] == longest:
            return padded
        output = torch.full(
            (len(tensors), shape[0]), padding_value, dtype=first.dtype, device=first.device
        )
        if left:
            output[:, shape[0] - longest :] = padded
        else:
            output[:, :longest] = padded
        return output
    output = torch.full(
        (len(tensors), *shape), padding_value, dtype=first.dtype, device=first.device
    )
    for row, tensor in enumerate(tensors):
        start = shape[0] - tensor.shape[0] if left else 0
        region = (slice(start, start + tensor.shape[0]), *(slice(0, s) for s in tensor.shape[1:]))
        output[row][region] = tensor
    return output


def _exact_as_float(value: Any) -> bool:
    """Whether `pad_sequence` (which takes the pad value as a float) pads with exactly this."""
    if type(value) is int:
        return abs(value) <= 2**53
    return type(value) is float


def pad_with_mask(
    sequences: list,
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
    # Lists of ints are written straight into the padded matrix; anything else (None) takes
    # the general path, which pads it the same way or names the bad row.
    native = _native.pad_sequences(sequences, pad_id=padding_value, multiple=multiple, left=left)
    if native is not None:
        ids, mask = native
        return torch.from_numpy(ids), torch.from_numpy(mask)
    for row, value in enumerate(sequences):
        if type(value) is not list and not isinstance(value, (list, tuple)):
            raise TypeError(
                f"'sequences' in row {row} is a {type(value).__name__}; pad_with_mask takes "
                "lists of token ids (pad takes tensors)"
            )
    ids, mask = padded_ids(sequences, padding_value, multiple, left)
    return torch.from_numpy(ids), torch.from_numpy(mask)


def padded_ids(
    sequences: list,
    padding_value: int,
    multiple: int | None,
    left: bool,
    where: Callable[[int], str] = lambda row: f"'sequences' in row {row}",
) -> tuple[np.ndarray, np.ndarray]:
    """Integer sequences padded (int64) with their attention mask (int64), in one native call.
    `where(i)` says where sequence `i` came from ("'chosen_ids' in row 3"), for error messages."""
    return padded_columns([sequences], padding_value, multiple, left, lambda _, row: where(row))[0]


def padded_columns(
    columns: list[list],
    padding_value: int,
    multiple: int | None,
    left: bool,
    where: Callable[[int, int], str],
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Several columns of integer sequences (one per row each), each padded to its own longest
    with its attention mask, in one native call. `where(column, row)` names a sequence."""
    keys = [f"{_IDS}{index}" for index in range(len(columns))]
    groups = [
        (key, padding_value, "longest", None, multiple, left, [], f"{_MASK}{key}") for key in keys
    ]
    try:
        # Rows of exact dicts take the native module's in-place path (a mapping of lists does not).
        rows = [dict(zip(keys, values, strict=True)) for values in zip(*columns, strict=True)]
        native = _native.collate(rows, groups, float32=False, keys=keys)
    except (TypeError, ValueError) as error:
        for index, column in enumerate(columns):
            _find_bad_row(column, lambda row, index=index: where(index, row))
        message = str(error)
        found = re.match(r"'\x00ids(\d+)' in row (\d+)", message)
        if found:
            column, row = int(found.group(1)), int(found.group(2))
            message = where(column, row) + message[found.end() :]
        raise type(error)(message) from None
    padded = []
    for index, key in enumerate(keys):
        values = native[key]
        if values.dtype.kind not in "iu" or values.ndim != 2:
            _find_bad_row(columns[index], lambda row, index=index: where(index, row))
            raise TypeError(f"{where(index, 0)} holds {values.dtype} values; it must hold integers")
        padded.append((values, native[f"{_MASK}{key}"]))
    return padded


def _find_bad_row(sequences: list, where: Callable[[int], str]) -> None:
    """Raise for the first sequence that is not a list or tuple of integers (the slow, exact
    check, run only after the native call has refused the batch)."""
    for row, value in enumerate(sequences):
        if isinstance(value, (np.ndarray, torch.Tensor)):
            continue  # the native call's own message names what is wrong with an array
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{where(row)} is a {type(value).__name__}; it must be a list of ints")
        for item in value:
            if isinstance(item, (bool, np.bool_)) or not isinstance(item, (int, np.integer)):
                raise TypeError(
                    f"{where(row)} holds a {type(item).__name__} ({item!r}); it must hold integers"
                )
