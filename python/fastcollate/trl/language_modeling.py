"""TRL's `DataCollatorForLanguageModeling` (the SFT collator) on the native calls.

Python rows take one native call. Padded: `_native.pad_with_labels` writes `input_ids`,
`labels` (a row without them takes its input ids), position ids and the attention mask into
int64 buffers. Padding-free: `_native.flatten_batch` writes the one row, its position ids and
sequence boundaries, reading pre-packed rows' `seq_lengths` in the same call; a
`pad_to_multiple_of` pads that row in numpy. Either call reads the usual batch (every value a
list or tuple of ints, int64 being its dtype) by the reader's strict route and any other by its
lax route, which names the key and row of a bad value; rows read the lax way are then cast to
their own dtypes, as TRL's `torch.tensor` keeps them. An ArrowBatch is padded by `collate` on
its Arrow storage, the rest (default labels, position ids, the padding-free row and its
sequence boundaries) a few numpy passes over those buffers, handed to torch without a copy."""

from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter
from typing import Any, cast

import numpy as np
import torch
from trl.trainer.sft_trainer import DataCollatorForLanguageModeling as TRLCollator

from .. import _native
from ..arrow import ArrowBatch
from ..collators.base import TakesArrowBatches, batch_rows, first_keys
from ..collators.native import collate
from .collator_options import PtOnly, checked_options

# Keys made by the native call; no column can hold these names.
_TOKENS = "\0tokens"
_SEQUENCES = "\0sequences"
_INT64 = np.dtype(np.int64)
_LISTS = {list}
_TORCH_INTEGERS: dict[Any, np.dtype[Any]] = {
    torch.int8: np.dtype(np.int8),
    torch.int16: np.dtype(np.int16),
    torch.int32: np.dtype(np.int32),
    torch.int64: _INT64,
    torch.uint8: np.dtype(np.uint8),
}
_NUMPY_INTEGERS = frozenset(_TORCH_INTEGERS.values())
_PACKED_ROW_HINT = "pre-packed rows (TRL's pack_dataset)"


@dataclass
class DataCollatorForLanguageModeling(TakesArrowBatches, PtOnly, TRLCollator):
    """Same arguments and output as `trl.trainer.sft_trainer.DataCollatorForLanguageModeling`
    (TRL 1.16): `pad_token_id`, `padding_free`, `return_position_ids`, `pad_to_multiple_of`,
    `return_tensors` ("pt" only, as in TRL).

    Padded (default): `input_ids` (padded right with `pad_token_id`), `labels` (the rows'
    `labels`, else a copy of `input_ids`; padded with -100), `position_ids` when
    `return_position_ids`, `attention_mask`. Padding-free: the batch as one row — `input_ids`,
    `labels` (-100 at the start of every sequence), `position_ids`, `cu_seq_lens_q/k` (int32),
    `max_length_q/k` (ints), `seq_idx` (int32). Rows with `seq_lengths` (packed by
    `trl.pack_dataset`) hold several sequences: position ids restart at each one. Dtypes follow
    TRL's: the rows' integer dtype (Python lists: int64), int64 position ids.

    Other keys of the rows (`completion_mask`, `assistant_masks`, text) are ignored, as TRL
    ignores them: `SFTTrainer` has already turned the masks into `labels`. Also takes an
    `ArrowBatch` (see `fastcollate.ArrowBatches`), read without Python rows.

    Unlike TRL, bad input raises a ValueError or TypeError naming the key and row where TRL
    would build mismatched tensors or fail deep in torch: labels whose length differs from
    `input_ids`, `seq_lengths` that do not add up to the row or hold a length below 1,
    non-integer ids or labels, an empty batch, and a padding-free batch without tokens.
    """

    # A subclass replacing either may expect a list of rows.
    _batch_methods = ("__call__", "torch_call")

    def torch_call(self, examples: Any) -> dict[str, Any]:
        features = batch_rows(examples, "input_ids")
        pad_token_id, multiple, _ = checked_options(self)
        padding_free = bool(self.padding_free)
        # Python rows: one native call, which reads them by the reader's strict route or its
        # lax one. An ArrowBatch: its columns, padded by `collate` on Arrow storage (below).
        if not isinstance(features, ArrowBatch):
            if padding_free:
                return _flattened(features, pad_token_id, multiple)
            return _padded(features, pad_token_id, multiple, bool(self.return_position_ids))
        packed = (padding_free or bool(self.return_position_ids)) and "seq_lengths" in first_keys(
            features
        )
        features, has_labels = _with_labels(features)

        keys = ["input_ids", "labels"] if has_labels else ["input_ids"]
        followers = [("labels", -100, True)] if has_labels else []
        groups = [
            _native.PadGroup(
                "input_ids",
                pad_value=pad_token_id,
                pad_to_multiple_of=None if padding_free else multiple,
                followers=followers,
                attention_mask=_TOKENS,
            )
        ]
        if packed:
            keys.append("seq_lengths")
            groups.append(_native.PadGroup("seq_lengths", pad_value=0, attention_mask=_SEQUENCES))
        native = collate(features, groups, float32=False, keys=keys)
        for key in keys:
            _check_integers(features, key, native[key])
        input_ids = native["input_ids"]
        # Only padding-free rows and packed position ids need the lengths (a pass over the mask).
        row_lengths: Any = native[_TOKENS].sum(axis=1) if padding_free or packed else None
        sequence_lengths = _sequence_lengths(native, row_lengths) if packed else None
        # Arrow rows are Python lists to TRL (int64), the native output's dtype.
        ids_dtype = labels_dtype = None

        if padding_free:
            flat_ids = _unpadded(input_ids, row_lengths)
            return _padding_free(
                flat_ids,
                _unpadded(native["labels"], row_lengths) if has_labels else flat_ids,
                row_lengths,
                sequence_lengths,
                pad_token_id,
                multiple,
                ids_dtype,
                labels_dtype,
            )
        mask: Any = (
            native[_TOKENS].astype(bool) if not has_labels or self.return_position_ids else None
        )
        labels = native["labels"] if has_labels else np.where(mask, input_ids, -100)
        batch = {
            "input_ids": _tensor(input_ids, ids_dtype, "input_ids"),
            "labels": _tensor(labels, labels_dtype, "labels"),
        }
        if mask is not None and self.return_position_ids:
            columns = np.arange(mask.shape[1], dtype=np.int64)
            if sequence_lengths is None:
                positions = np.where(mask, columns, 0)
            else:
                total = int(row_lengths.sum())
                positions = np.zeros(mask.shape, dtype=np.int64)
                positions[mask] = _positions(sequence_lengths, total, total)
            batch["position_ids"] = torch.from_numpy(positions)
        batch["attention_mask"] = _tensor(native[_TOKENS], ids_dtype, "attention_mask")
        return batch


def _padded(
    features: Any, pad_token_id: int, multiple: int | None, position_ids: bool
) -> dict[str, Any]:
    """TRL's padded batch of Python rows, written by `_native.pad_with_labels` in one native
    call, masks and position ids included: the reader's strict route for the usual batch (every
    value a list or tuple of ints, int64 being its dtype), its lax route for any other, which
    names the key and row of a bad value. Rows read the lax way come back as numpy matrices,
    cast here to the first row's dtypes."""
    batch, read_strictly = _native.pad_with_labels(
        features,
        pad_id=pad_token_id,
        multiple=multiple,
        position_ids=position_ids,
        to_tensor=torch.from_numpy,
    )
    if read_strictly:
        return batch
    features, _ = _with_labels(features)
    ids_dtype = _batch_dtype(features, "input_ids", False)
    labels_dtype = _batch_dtype(features, "labels", False) if "labels" in features[0] else ids_dtype
    # The lax route's matrices are numpy (no torch call before the casts): TRL's dtypes.
    dtypes = {"input_ids": ids_dtype, "labels": labels_dtype, "attention_mask": ids_dtype}
    return {key: _tensor(values, dtypes.get(key), key) for key, values in batch.items()}


# What TRL's padding-free batch is, for both ways of reading it: -100 at every sequence start,
# position ids from 0, `seq_idx` and `cu_seq_lens`, integer rows only, empty rows adding nothing.
_FLATTEN_OPTIONS: dict[str, Any] = {
    "separator_id": -100,
    "position_ids_start": 0,
    "position_ids": True,
    "seq_idx": True,
    "cu_seq_lens": True,
    "integers_only": True,
    "skip_empty": True,
}


def _flattened(features: Any, pad_token_id: int, multiple: int | None) -> dict[str, Any]:
    """The padding-free row of a batch, written by the core in one native call: -100 at every
    sequence start, position ids from 0; an empty row adds no sequence. A row holds one
    sequence, or (pre-packed rows, with `seq_lengths` in the first row) the ones its
    `seq_lengths` give, checked to be at least 1 and to add up to the row. A row without
    `labels` takes its `input_ids` when another row has labels (TRL's rule). Floats and all-bool
    rows are refused there (transformers' flattening collator truncates floats). The usual
    batch (every value a list or tuple of ints) is read straight from the rows, int64 being its
    dtype; any other keeps its rows' dtypes."""
    flat = _native.flatten_batch(
        features,
        labels=False,
        labels_from_ids=True,
        **_FLATTEN_OPTIONS,
        seq_lengths="seq_lengths" in first_keys(features),
    )
    if multiple is not None:
        _pad_flat(flat, pad_token_id, multiple)
    if flat["read_strictly"]:
        return _padding_free_batch(flat, None, None)
    features, has_labels = _with_labels(features)
    ids_dtype = _batch_dtype(features, "input_ids", True)
    labels_dtype = _batch_dtype(features, "labels", True) if has_labels else ids_dtype
    return _padding_free_batch(flat, ids_dtype, labels_dtype)


def _pad_flat(flat: dict[str, Any], pad_token_id: int, multiple: int) -> None:
    """`_native.flatten_batch`'s row padded right to a multiple of `multiple`, as TRL pads it:
    `pad_token_id` ids, -100 labels, 0 position ids, each padding token a sequence of its own
    (in `seq_idx` and `cu_seq_lens`)."""
    total = flat["input_ids"].shape[1]
    width = -(-total // multiple) * multiple
    if width == total:
        return
    # The one sizing rule before numpy allocates (`_native.check_output_size`).
    _native.check_output_size("input_ids", (1, width), 8, "int64")
    extra = width - total
    for key, pad in (("input_ids", pad_token_id), ("labels", -100), ("position_ids", 0)):
        flat[key] = np.concatenate([flat[key], np.full((1, extra), pad, np.int64)], axis=1)
    sequences = len(flat["cu_seq_lens"]) - 1
    padding = np.arange(sequences, sequences + extra, dtype=np.int32)
    flat["seq_idx"] = np.concatenate([flat["seq_idx"], padding[None]], axis=1)
    ends = np.arange(total + 1, width + 1, dtype=np.int32)
    flat["cu_seq_lens"] = np.concatenate([flat["cu_seq_lens"], ends])
    flat["max_length"] = max(flat["max_length"], 1)


def _padding_free_batch(
    flat: dict[str, Any], ids_dtype: np.dtype | None, labels_dtype: np.dtype | None
) -> dict[str, Any]:
    """TRL's padding-free batch from `_native.flatten_batch`'s output, ids and labels in the
    rows' dtypes (None: int64, as written)."""
    cu_seq_lens = torch.from_numpy(flat["cu_seq_lens"])
    max_length = flat["max_length"]
    return {
        "input_ids": _tensor(flat["input_ids"], ids_dtype, "input_ids"),
        "labels": _tensor(flat["labels"], labels_dtype, "labels"),
        "position_ids": torch.from_numpy(flat["position_ids"]),
        "cu_seq_lens_q": cu_seq_lens,
        "cu_seq_lens_k": cu_seq_lens,
        "max_length_q": max_length,
        "max_length_k": max_length,
        "seq_idx": torch.from_numpy(flat["seq_idx"]),
    }


def _with_labels(features: Any) -> tuple[Any, bool]:
    """The batch and whether its rows carry `labels`. TRL falls back to `input_ids` row by row;
    in a batch where only some rows have labels, the others get theirs from `input_ids`."""
    if isinstance(features, ArrowBatch):
        return features, "labels" in features.columns
    flags = ["labels" in row for row in features]
    if all(flags):
        return features, True
    if not any(flags):
        return features, False
    rows = [
        # A row without input_ids is left for the native call to name.
        row if flag or "input_ids" not in row else {**row, "labels": row["input_ids"]}
        for row, flag in zip(features, flags, strict=True)
    ]
    return rows, True


def _unpadded(values: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The rows of a right-padded matrix without their padding, end to end (a copy of the
    tokens only, where a boolean mask would read every padded cell)."""
    return np.concatenate(
        [row[:length] for row, length in zip(values, lengths.tolist(), strict=True)]
    )


def _check_integers(features: Any, key: str, values: np.ndarray) -> None:
    """Token ids, labels and sequence lengths are integers, a sequence per row."""
    if values.ndim != 2:
        raise ValueError(
            f"'{key}' in row 0 is a single number; the collator needs a sequence in every row"
        )
    if values.dtype.kind in "iu":
        return
    for row, feature in enumerate(features):
        value = feature[key]
        if hasattr(value, "dtype"):
            _row_dtype(value, key, row)
        elif isinstance(value, (list, tuple)) and not all(
            isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)) for x in value
        ):
            raise TypeError(
                f"'{key}' in row {row} holds floats or bools, not token ids; it must hold "
                "integers: tokenize first, or convert the values to integers"
            )
    raise TypeError(f"'{key}' holds {values.dtype} values; it must hold integers")


def _sequence_lengths(native: dict[str, Any], tokens: np.ndarray) -> np.ndarray:
    """Every row's `seq_lengths`, in order, after checking each is at least 1 and a row's add
    up to its number of tokens."""
    lengths = native["seq_lengths"]
    present = native[_SEQUENCES].astype(bool)
    below_one = (lengths < 1) & present
    if below_one.any():
        row = int(below_one.any(axis=1).argmax())
        raise ValueError(
            f"'seq_lengths' in row {row} holds {lengths[row][present[row]].tolist()}: every "
            f"sequence of {_PACKED_ROW_HINT} needs at least one token"
        )
    sums = lengths.sum(axis=1)
    wrong = sums != tokens
    if wrong.any():
        row = int(wrong.argmax())
        raise ValueError(
            f"'seq_lengths' in row {row} add up to {int(sums[row])} but 'input_ids' has "
            f"{int(tokens[row])} tokens; the lengths of {_PACKED_ROW_HINT} must cover the row"
        )
    return cast(np.ndarray, lengths[present])


def _positions(sequence_lengths: np.ndarray, total: int, width: int) -> np.ndarray:
    """Position ids restarting at 0 at the start of every sequence, laid end to end, then 0s up
    to `width`."""
    # Each sequence start steps the running offset up by the previous sequence's length.
    steps = np.zeros(width, dtype=np.int64)
    starts = np.cumsum(sequence_lengths[:-1])
    steps[starts] = sequence_lengths[:-1]
    positions = np.arange(width, dtype=np.int64)
    positions -= np.cumsum(steps)
    positions[total:] = 0
    return positions


def _filled(values: np.ndarray, width: int, pad: int) -> np.ndarray:
    """`values` padded right to `width` with `pad` (`values` itself when no padding is due)."""
    if width == len(values):
        return values
    row = np.empty(width, dtype=values.dtype)
    row[: len(values)] = values
    row[len(values) :] = pad
    return row


def _padding_free(
    input_ids: np.ndarray,
    labels: np.ndarray,
    row_lengths: np.ndarray,
    sequence_lengths: np.ndarray | None,
    pad_token_id: int,
    multiple: int | None,
    ids_dtype: np.dtype | None,
    labels_dtype: np.dtype | None,
) -> dict[str, Any]:
    """The batch as one row, as TRL builds it: sequences end to end, padded right to
    `pad_to_multiple_of`; a sequence starts wherever the position id is 0 (so each padding token
    is a sequence of its own, as in TRL)."""
    total = len(input_ids)
    if total == 0:
        raise ValueError("'input_ids' holds no tokens in any row; a padding-free batch needs one")
    width = total if multiple is None else -(-total // multiple) * multiple
    # The one sizing rule before numpy allocates (`_native.check_output_size`).
    _native.check_output_size("input_ids", (1, width), 8, "int64")
    if sequence_lengths is None:
        sequence_lengths = row_lengths[row_lengths > 0]
    positions = _positions(sequence_lengths, total, width)
    starts = np.flatnonzero(positions == 0)
    ids_row = _filled(input_ids, width, pad_token_id)
    labels_row = _filled(labels, width, -100)
    if labels_row is input_ids:
        labels_row = labels_row.copy()
    labels_row[starts] = -100
    boundaries = np.append(starts, width).astype(np.int32)
    spans = np.diff(boundaries)
    cu_seq_lens = torch.from_numpy(boundaries)
    max_length = int(spans.max())
    return {
        "input_ids": _tensor(ids_row[None], ids_dtype, "input_ids"),
        "labels": _tensor(labels_row[None], labels_dtype, "labels"),
        "position_ids": torch.from_numpy(positions[None]),
        "cu_seq_lens_q": cu_seq_lens,
        "cu_seq_lens_k": cu_seq_lens,
        "max_length_q": max_length,
        "max_length_k": max_length,
        "seq_idx": torch.from_numpy(np.repeat(np.arange(len(spans), dtype=np.int32), spans)[None]),
    }


def _row_dtype(value: Any, key: str, row: int) -> np.dtype:
    """The dtype `torch.tensor(value)` gives a row's values: the array's own, int64 for Python
    lists (whose values the native call checks)."""
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        return _INT64
    # torch's classic integer dtypes (its uint16/32/64 lack most operations, -100 included).
    found = dtype if dtype in _NUMPY_INTEGERS else _TORCH_INTEGERS.get(dtype)
    if found is None:
        raise TypeError(
            f"'{key}' in row {row} holds {dtype} values; it must hold integers (int8, int16, "
            "int32, int64 or uint8)"
        )
    return found


def _batch_dtype(features: Any, key: str, promoted: bool) -> np.dtype:
    """The first row's dtype, or (`promoted`) the one `torch.cat` gives all rows'."""
    if set(map(type, map(itemgetter(key), features))) == _LISTS:
        return _INT64  # the usual batch (rows read through datasets), in C loops
    dtypes = [_row_dtype(row[key], key, i) for i, row in enumerate(features)]
    if not promoted or len(set(dtypes)) == 1:
        return dtypes[0]
    return np.result_type(*dtypes)


def _tensor(values: np.ndarray, dtype: np.dtype | None, key: str) -> torch.Tensor:
    """`values` (int64) as a tensor of the rows' dtype; a value that dtype cannot hold (a pad
    value, or a wider row's id) is an error, where TRL would wrap it around silently."""
    if dtype is not None and dtype != values.dtype:
        cast = values.astype(dtype)
        if not np.array_equal(cast, values):
            raise ValueError(
                f"'{key}' of this batch holds values (or pads with a value) that {dtype}, the "
                "dtype of its rows, cannot hold"
            )
        values = cast
    return torch.from_numpy(values)
