"""`DataCollatorWithFlattening`: a batch packed into one `[1, total_tokens]` row (padding-free
training), from Python rows in one Rust pass or from Arrow through one padded native call."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _native
from .._internal.tensors import torch_module
from .._internal.worker_handover import hands_over
from ..arrow import ArrowBatch
from .base import FRAMEWORKS, TakesArrowBatches, batch_rows, first_keys
from .default import DefaultDataCollator
from .padding_options import checked_pad_id


def flattening_framework(return_tensors: Any) -> str:
    """The flattening collator's `return_tensors`: "pt" or "np" (or a TensorType of them),
    refused with transformers' message."""
    framework: str = getattr(return_tensors, "value", return_tensors)
    if framework not in FRAMEWORKS:
        raise ValueError(
            f'return_tensors must be one of ("pt", "np"), {return_tensors=} not supported'
        )
    return framework


@dataclass
class DataCollatorWithFlattening(TakesArrowBatches, DefaultDataCollator):
    """Same arguments and output as `transformers.DataCollatorWithFlattening`: packs the batch
    into one `[1, total_tokens]` row in one Rust pass — `input_ids`, `labels` (each sequence's
    first label set to `separator_id`; the rows' own `labels` when they have them, else
    `input_ids`), `position_ids` from `position_ids_start`, and optionally `seq_idx` (int32),
    `cu_seq_lens_q/k` (int32) and `max_length_q/k` (Python ints).

    Rows with empty `input_ids` are left out, labels and all, as transformers 5.24 does (a
    batch of nothing but empty rows is a ValueError); older transformers gave them a
    separator label past their end. Unlike transformers, labels of a different length than
    `input_ids` in a row raise a ValueError naming the row instead of building a batch whose
    `labels` and `input_ids` lengths disagree; so do rows with a `seq_lengths` key (TRL's
    packed rows, which transformers would silently read as one sequence each: use
    `fastcollate.trl.DataCollatorForLanguageModeling(padding_free=True)` for them)."""

    def __init__(
        self,
        *args: Any,
        return_position_ids: bool = True,
        separator_id: int = -100,
        return_flash_attn_kwargs: bool = False,
        return_seq_idx: bool = False,
        position_ids_start: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.return_position_ids = return_position_ids
        self.separator_id = separator_id
        self.return_flash_attn_kwargs = return_flash_attn_kwargs
        self.return_seq_idx = return_seq_idx
        self.position_ids_start = position_ids_start
        # Bad options raise here (return_tensors in `__post_init__`), by the rules each call
        # applies.
        checked_pad_id("separator_id", separator_id)
        checked_pad_id("position_ids_start", position_ids_start)

    checked_framework = staticmethod(flattening_framework)

    @hands_over
    def __call__(self, features: Any, return_tensors: str | None = None,
                 separator_id: int | None = None) -> dict[str, Any]:
        if return_tensors is None:
            return_tensors = self.return_tensors
        if separator_id is None:
            separator_id = self.separator_id
        framework = flattening_framework(return_tensors)
        features = batch_rows(features, "input_ids")
        if "seq_lengths" in first_keys(features):
            raise ValueError(_PACKED_ROWS)
        options: dict[str, Any] = {
            "labels": "labels" in first_keys(features),
            "separator_id": checked_pad_id("separator_id", separator_id),
            "position_ids_start": checked_pad_id("position_ids_start", self.position_ids_start),
            "position_ids": bool(self.return_position_ids),
            "seq_idx": bool(self.return_seq_idx),
            "cu_seq_lens": bool(self.return_flash_attn_kwargs),
        }
        packed: dict[str, Any] | None = None
        if isinstance(features, ArrowBatch):
            packed = _flatten_arrow(features, **options)
            if packed is None:
                features = features.rows()
        if packed is None:
            # Empty rows are left out, labels and all, as transformers 5.24 does.
            packed = _native.flatten_batch(features, drop_empty=True, **options)
        batch: dict[str, Any] = {"input_ids": packed["input_ids"], "labels": packed["labels"]}
        for key in ("position_ids", "seq_idx"):
            if key in packed:
                batch[key] = packed[key]
        if "cu_seq_lens" in packed:
            batch["cu_seq_lens_q"] = packed["cu_seq_lens"]
            # A separate array, as transformers makes one tensor per key.
            batch["cu_seq_lens_k"] = packed["cu_seq_lens"].copy()
        if framework == "pt":
            from_numpy = torch_module().from_numpy
            batch = {key: from_numpy(value) for key, value in batch.items()}
        if "max_length" in packed:
            batch["max_length_q"] = batch["max_length_k"] = packed["max_length"]
        return batch


# transformers' collator reads each row as one sequence, so a row that TRL's pack_dataset
# filled with several (listed in `seq_lengths`) would get position ids and separators that run
# across its sequences: wrong training data, silently. Honouring the key would change what a
# transformers drop-in returns, so it is refused.
_PACKED_ROWS = (
    "row 0 has 'seq_lengths': it holds several packed sequences (TRL's pack_dataset), which "
    "DataCollatorWithFlattening, like transformers', would read as one sequence, giving wrong "
    "position_ids and labels. Use fastcollate.trl.DataCollatorForLanguageModeling(pad_token_id="
    "..., padding_free=True), which restarts position ids at every packed sequence, or drop the "
    "'seq_lengths' column for rows that each hold one sequence."
)
_INT64_MAX = 2**63 - 1
_INT32_MAX = 2**31 - 1
# Attention-mask keys for the padded input_ids / labels: no column can hold these names.
_IDS_MASK, _LABELS_MASK = "\0input_ids", "\0labels"


def _is_int64(value: Any) -> bool:
    return type(value) is int and -_INT64_MAX - 1 <= value <= _INT64_MAX


def _flatten_arrow(
    batch: ArrowBatch,
    *,
    labels: bool,
    separator_id: Any,
    position_ids_start: Any,
    position_ids: bool,
    seq_idx: bool,
    cu_seq_lens: bool,
) -> dict[str, Any] | None:
    """What `_native.flatten_batch` gives for the batch's rows, read from Arrow: the sequences
    are padded (right, int64) in one native call and packed from there with numpy. None where
    the row path might not give the same: an error (its message is the row path's to give, as
    for a batch of empty sequences alone), float values (truncated there), labels whose lengths
    differ from the inputs', sizes that overflow, or options that are not plain ints. Rows with
    empty input_ids are left out, as the row path leaves them out."""
    import pyarrow as pa

    if not (_is_int64(separator_id) and _is_int64(position_ids_start)):
        return None
    schema = batch.source.schema
    keys = ["input_ids", "labels"] if labels else ["input_ids"]
    for key in keys:
        # Lists of integers or bools (the Arrow path reads no other lists).
        value_type = getattr(schema.field(key).type, "value_type", None)
        if value_type is None or not (
            pa.types.is_integer(value_type) or pa.types.is_boolean(value_type)
        ):
            return None
    groups = [_native.PadGroup("input_ids", pad_value=0, attention_mask=_IDS_MASK)]
    if labels:
        groups.append(_native.PadGroup("labels", pad_value=0, attention_mask=_LABELS_MASK))
    try:
        native = batch.collate(
            groups, float32=False, dtypes=dict.fromkeys(keys, "int64"), keys=keys
        )
    except (ValueError, TypeError, IndexError, OverflowError):
        return None
    mask = native[_IDS_MASK].astype(bool)
    lengths = mask.sum(axis=1)
    # Rows with empty input_ids are left out, labels and all, as on the row path; a batch of
    # nothing else is the row path's error to give.
    kept = lengths > 0
    if not kept.any():
        return None
    ids = native["input_ids"]
    # Arrays where `labels` (None otherwise).
    label_ids: Any = native["labels"] if labels else None
    label_mask: Any = native[_LABELS_MASK].astype(bool) if labels else None
    if not kept.all():
        mask, lengths, ids = mask[kept], lengths[kept], ids[kept]
        if labels:
            label_ids, label_mask = label_ids[kept], label_mask[kept]
    if labels and not np.array_equal(label_mask.sum(axis=1), lengths):
        return None
    total = int(lengths.sum())
    max_length = int(lengths.max())
    if (cu_seq_lens and total > _INT32_MAX) or (
        position_ids and position_ids_start + max_length > _INT64_MAX
    ):
        return None
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    starts = offsets[:-1]
    input_ids = ids[mask]
    label_values = label_ids[label_mask] if labels else input_ids.copy()
    label_values[starts] = separator_id
    packed: dict[str, Any] = {
        "input_ids": input_ids.reshape(1, total),
        "labels": label_values.reshape(1, total),
    }
    if position_ids:
        positions = np.arange(total, dtype=np.int64) - np.repeat(starts, lengths)
        positions += position_ids_start
        packed["position_ids"] = positions.reshape(1, total)
    if seq_idx:
        rows = np.arange(len(lengths), dtype=np.int32)
        packed["seq_idx"] = np.repeat(rows, lengths).reshape(1, total)
    if cu_seq_lens:
        packed["cu_seq_lens"] = offsets.astype(np.int32)
        packed["max_length"] = max_length
    return packed
