"""Preference batches read from Arrow: every token column of an `ArrowBatch` padded in one
native call, then prompt and completion joined, cut to `max_length` and padded together with
numpy — what the preference collators' row path gives for the same rows, without a Python list
per sequence."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import _native
from ..arrow import ArrowBatch
from ..collators.base import has_nulls

# The native call's mask key for a token column: no column can have this name.
_MASK = "\0mask:"


def token_columns(
    batch: ArrowBatch, keys: Sequence[str], scalars: Sequence[str]
) -> dict[str, Any] | None:
    """`{key: (values, lengths)}` for each token column of `keys` (int64, right-padded with 0,
    and each row's length) and `{key: list}` (Python numbers, as `datasets` gives them) for each
    of `scalars`. None where the row path must decide, giving the same output or its own error:
    an empty batch, a column missing or holding nulls, token values that are not integers, or
    an error of the native read."""
    import pyarrow as pa

    if not len(batch):
        return None
    schema = batch.source.schema
    for key in (*keys, *scalars):
        if key not in batch.columns or has_nulls(batch, key):
            return None
    for key in keys:
        value_type = getattr(schema.field(key).type, "value_type", None)
        if value_type is None or not pa.types.is_integer(value_type):
            return None
    groups = [_native.PadGroup(key, pad_value=0, attention_mask=_MASK + key) for key in keys]
    try:
        native = batch.collate(
            groups, float32=False, dtypes=dict.fromkeys(keys, "int64"), keys=[*keys, *scalars]
        )
    except (ValueError, TypeError, OverflowError, IndexError):
        return None
    found: dict[str, Any] = {
        key: (native[key], native[_MASK + key].sum(axis=1, dtype=np.int64)) for key in keys
    }
    for key in scalars:
        found[key] = native[key].tolist()
    return found


def joined(
    prompt: tuple[Any, ...], completion: tuple[Any, ...], max_length: int | None, keep_end: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's prompt followed by its completion, cut to `max_length` from the start or (keep
    end) from the end: (values, lengths, the column where each completion starts after the
    cut). Values past a row's length are left unspecified."""
    (prompt_values, prompt_lengths), (completion_values, completion_lengths) = prompt, completion
    rows, prompt_width = prompt_values.shape
    width = prompt_width + completion_values.shape[1]
    values = np.zeros((rows, width), dtype=np.int64)
    values[:, :prompt_width] = prompt_values
    columns = np.arange(completion_values.shape[1])
    inside = columns < completion_lengths[:, None]
    row_of = np.broadcast_to(np.arange(rows)[:, None], inside.shape)[inside]
    values[row_of, (prompt_lengths[:, None] + columns)[inside]] = completion_values[inside]
    lengths = prompt_lengths + completion_lengths
    if max_length is None:
        return values, lengths, prompt_lengths
    kept = np.minimum(lengths, max_length)
    if not keep_end:
        return values, kept, prompt_lengths
    dropped = lengths - kept
    source = np.minimum(np.arange(width)[None, :] + dropped[:, None], max(width - 1, 0))
    shifted = np.take_along_axis(values, source, axis=1) if width else values
    return shifted, kept, np.maximum(prompt_lengths - dropped, 0)


def padded_together(
    parts: list[tuple[np.ndarray, np.ndarray]], pad_token_id: int, multiple: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """The rows of every part, one part after another, padded right to the longest (rounded up
    to `multiple`) with `pad_token_id`, and their attention mask; both int64."""
    lengths = np.concatenate([part_lengths for _, part_lengths in parts])
    width = int(lengths.max()) if lengths.size else 0
    if multiple is not None:
        width = -(-width // multiple) * multiple
    # The one sizing rule before numpy allocates (`_native.check_output_size`).
    _native.check_output_size("input_ids", (len(lengths), width), 8, "int64")
    input_ids = np.full((len(lengths), width), pad_token_id, dtype=np.int64)
    inside = np.arange(width)[None, :] < lengths[:, None]
    start = 0
    for values, part_lengths in parts:
        end = start + len(part_lengths)
        columns = min(width, values.shape[1])
        block = inside[start:end, :columns]
        input_ids[start:end, :columns][block] = values[:, :columns][block]
        start = end
    return input_ids, inside.astype(np.int64)
