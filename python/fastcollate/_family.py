"""Drop-ins for the rest of transformers' collator family, on the Rust core:
DataCollatorForTokenClassification, DataCollatorForSeq2Seq, DataCollatorWithFlattening and
DataCollatorForLanguageModeling. Same names, fields and outputs as transformers 5.x.

Each also collates an `ArrowBatch` (a batch of `fastcollate.ArrowBatches`) straight from the
dataset's Arrow buffers, giving exactly what the same rows give on the row path."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _native
from ._arrow import ArrowBatch
from ._collators import DefaultDataCollator
from ._native_collate import collate
from ._padding import (
    PadSettings,
    checked_pad_id,
    clamped_multiple,
    pad,
    padding_group,
    padding_strategy,
)
from ._rows import first_row
from ._stacked_masks import put_back, set_aside_masks
from ._tensors import batch_encoding, convert, torch_module

FRAMEWORKS = ("pt", "np")


def _framework(return_tensors: Any) -> str:
    """The "pt" / "np" switch of transformers' DataCollatorMixin."""
    value = getattr(return_tensors, "value", return_tensors)
    if value not in FRAMEWORKS:
        raise ValueError(
            f"Framework '{return_tensors}' not recognized! Use return_tensors='pt' or 'np'."
        )
    return value


def _rows(features: Any, main_input: str) -> Any:
    """The batch as a list of mappings whose first row holds the main input, or an ArrowBatch
    (left in Arrow storage) that has the main input's column."""
    if isinstance(features, ArrowBatch):
        if not len(features):
            raise ValueError("cannot collate an empty batch: no rows were given")
        return features.require(main_input)
    if isinstance(features, Mapping) or isinstance(features, (str, bytes)):
        raise TypeError("a collator takes a list of rows (mappings of feature names to values)")
    if not isinstance(features, (list, tuple)):
        features = list(features)
    first_row(features, main_input, "collate")
    return features


def _first_keys(features: Any) -> Any:
    """What `key in first` looks at: the first row, or an ArrowBatch's columns (its rows)."""
    return features.columns if isinstance(features, ArrowBatch) else features[0]


def _has_nulls(batch: ArrowBatch, column: str) -> bool:
    """Whether `column` of the batch's dataset holds a null anywhere (None in a row)."""
    return batch.source.dataset.data.table.column(column).null_count > 0


class _TakesArrowBatches:
    """Collators that read an ArrowBatch natively (see `fastcollate.ArrowBatches`). A user
    subclass that replaces one of `_batch_methods` (which receive the batch) may expect a list of
    rows, so it is not handed ArrowBatches."""

    _batch_methods = ("__call__",)
    _arrow_class: type

    def __init_subclass__(cls, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        if _TakesArrowBatches in cls.__bases__:
            cls._arrow_class = cls

    @property
    def accepts_arrow_batches(self) -> bool:
        kind, base = type(self), self._arrow_class
        return all(getattr(kind, name) is getattr(base, name) for name in self._batch_methods)


def _padded_with_labels(
    features: list,
    settings: PadSettings,
    padding: Any,
    max_length: int | None,
    pad_to_multiple_of: int | None,
    return_tensors: str,
    *,
    label_follower: tuple | None = None,
    label_group: tuple | None = None,
    dtypes: dict | None = None,
    keys: list | None = None,
) -> dict:
    """One native call: the tokenizer's pad group (plus, for token classification, the labels
    as an independent follower) and, for seq2seq, a separate labels group."""
    group = padding_group(settings, padding, max_length, pad_to_multiple_of, None)
    if label_follower is not None:
        group = (*group[:6], (*group[6], label_follower), group[7])
    groups = [group] if label_group is None else [group, label_group]
    # Masks of two or more dimensions per row are stacked as they are, not padded (as
    # tokenizer.pad does).
    aside = None if isinstance(features, ArrowBatch) else set_aside_masks(features, keys)
    native = collate(
        features,
        groups,
        float32=return_tensors == "pt",
        dtypes=dtypes,
        keys=keys if aside is None else aside.keys,
    )
    batch = convert(native, return_tensors)
    if aside is not None:
        put_back(batch, aside, return_tensors)
    return batch


@dataclass
class DataCollatorForTokenClassification(_TakesArrowBatches):
    """Same fields and output as `transformers.DataCollatorForTokenClassification`: pads the
    inputs with the tokenizer's settings and `labels` (or `label`) to the padded input length
    with `label_pad_token_id`, on the tokenizer's padding side.

    Unlike transformers, a label row longer than the padded inputs raises a ValueError naming
    the row (transformers leaves it unpadded: a ragged batch, or labels wider than inputs)."""

    tokenizer: Any
    padding: bool | str = True
    max_length: int | None = None
    pad_to_multiple_of: int | None = None
    label_pad_token_id: int = -100
    return_tensors: str = "pt"

    _batch_methods = ("__call__", "torch_call", "numpy_call", "_collate")

    def __call__(self, features, return_tensors=None):
        if return_tensors is None:
            return_tensors = self.return_tensors
        return self._collate(features, _framework(return_tensors))

    def torch_call(self, features):
        """The batch as torch tensors, whatever `return_tensors` says (as transformers')."""
        return self._collate(features, "pt")

    def numpy_call(self, features):
        """The batch as numpy arrays, whatever `return_tensors` says (as transformers')."""
        return self._collate(features, "np")

    def _collate(self, features, return_tensors: str):
        settings = PadSettings.resolve(self.tokenizer)
        features = _rows(features, settings.main_input)
        first = _first_keys(features)
        label_name = "label" if "label" in first else "labels"
        if label_name not in first:
            return pad(
                features,
                self.tokenizer,
                padding=self.padding,
                max_length=self.max_length,
                pad_to_multiple_of=self.pad_to_multiple_of,
                return_tensors=return_tensors,
            )
        batch = _padded_with_labels(
            features,
            settings,
            self.padding,
            self.max_length,
            self.pad_to_multiple_of,
            return_tensors,
            label_follower=(
                label_name,
                checked_pad_id("label_pad_token_id", self.label_pad_token_id),
                False,
            ),
            dtypes={label_name: "int64"},
        )
        # transformers pads without the labels and adds them last.
        batch[label_name] = batch.pop(label_name)
        return batch_encoding(batch)


@dataclass
class DataCollatorForSeq2Seq(_TakesArrowBatches):
    """Same fields and output as `transformers.DataCollatorForSeq2Seq`: pads the inputs with the
    tokenizer's settings and the labels separately with `label_pad_token_id` (to the longest
    label, or `max_length` with padding="max_length", rounded up to `pad_to_multiple_of`, on
    the tokenizer's padding side), and adds `decoder_input_ids` from
    `model.prepare_decoder_input_ids_from_labels` when a model is given.

    Unlike transformers, a label longer than `max_length` under padding="max_length" raises a
    ValueError naming the row (transformers leaves it unpadded: a ragged batch, or labels
    wider than max_length), and return_tensors must be "pt" or "np" (transformers' None gives
    lists of inputs beside a numpy labels array)."""

    tokenizer: Any
    model: Any | None = None
    padding: bool | str = True
    max_length: int | None = None
    pad_to_multiple_of: int | None = None
    label_pad_token_id: int = -100
    return_tensors: str = "pt"


    def __call__(self, features, return_tensors=None):
        if return_tensors is None:
            return_tensors = self.return_tensors
        return_tensors = _framework(return_tensors)
        settings = PadSettings.resolve(self.tokenizer)
        features = _rows(features, settings.main_input)
        first = _first_keys(features)
        label_name = "label" if "label" in first else "labels"
        arrow = isinstance(features, ArrowBatch)
        if arrow and label_name in first and _has_nulls(features, label_name):
            # None labels mean "no labels" (or, mixed with labels, an error naming the row):
            # such a dataset goes to the row path, which decides.
            features, arrow = features.rows(), False
            first = features[0]
        has_labels = label_name in first
        if has_labels and not arrow and first[label_name] is None:
            # {"labels": None} in every row means no labels (a mix is an error, naming the row).
            has_labels = any(
                isinstance(row, Mapping) and row.get(label_name) is not None for row in features
            )
        # transformers pads without the label key; its padded labels then become "labels"
        # (replacing, in place, a "labels" key that the rows have beside "label").
        keys = None
        if not has_labels and label_name in first:
            keys = [k for k in first if k != label_name]
        dtypes = {label_name: "int64"} if has_labels else {}
        if label_name == "label" and "labels" in first:
            dtypes["labels"] = "int64"

        label_group = None
        if has_labels:
            no_padding = self.padding is False or padding_strategy(self.padding) == "do_not_pad"
            if not no_padding:
                max_padding = (
                    padding_strategy(self.padding) == "max_length" and self.max_length is not None
                )
                label_group = (
                    label_name,
                    checked_pad_id("label_pad_token_id", self.label_pad_token_id),
                    "max_length" if max_padding else "longest",
                    self.max_length if max_padding else None,
                    clamped_multiple(self.pad_to_multiple_of),
                    settings.padding_side == "left",
                    [],
                    None,
                )
            # Without padding, labels are stacked as they are: ragged rows raise, naming the row.

        batch = _padded_with_labels(
            features,
            settings,
            self.padding,
            self.max_length,
            self.pad_to_multiple_of,
            return_tensors,
            label_group=label_group,
            dtypes=dtypes,
            keys=keys,
        )
        if has_labels:
            batch["labels"] = batch.pop(label_name)
        elif "labels" not in batch:
            batch["labels"] = None
        batch = batch_encoding(batch)
        if (
            has_labels
            and self.model is not None
            and hasattr(self.model, "prepare_decoder_input_ids_from_labels")
        ):
            batch["decoder_input_ids"] = self.model.prepare_decoder_input_ids_from_labels(
                labels=batch["labels"]
            )
        return batch


@dataclass
class DataCollatorWithFlattening(_TakesArrowBatches, DefaultDataCollator):
    """Same arguments and output as `transformers.DataCollatorWithFlattening`: packs the batch
    into one `[1, total_tokens]` row in one Rust pass — `input_ids`, `labels` (each sequence's
    first label set to `separator_id`; the rows' own `labels` when they have them, else
    `input_ids`), `position_ids` from `position_ids_start`, and optionally `seq_idx` (int32),
    `cu_seq_lens_q/k` (int32) and `max_length_q/k` (Python ints).

    Unlike transformers, labels of a different length than `input_ids` in a row, and empty
    sequences, raise a ValueError naming the row instead of building a batch whose `labels`
    and `input_ids` lengths disagree."""

    def __init__(
        self,
        *args,
        return_position_ids=True,
        separator_id=-100,
        return_flash_attn_kwargs=False,
        return_seq_idx=False,
        position_ids_start=0,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        self.return_position_ids = return_position_ids
        self.separator_id = separator_id
        self.return_flash_attn_kwargs = return_flash_attn_kwargs
        self.return_seq_idx = return_seq_idx
        self.position_ids_start = position_ids_start


    def __call__(self, features, return_tensors=None, separator_id=None):
        if return_tensors is None:
            return_tensors = self.return_tensors
        if separator_id is None:
            separator_id = self.separator_id
        framework = getattr(return_tensors, "value", return_tensors)
        if framework not in FRAMEWORKS:
            raise ValueError(
                f'return_tensors must be one of ("pt", "np"), {return_tensors=} not supported'
            )
        features = _rows(features, "input_ids")
        options = {
            "labels": "labels" in _first_keys(features),
            "separator_id": checked_pad_id("separator_id", separator_id),
            "position_ids_start": checked_pad_id("position_ids_start", self.position_ids_start),
            "position_ids": bool(self.return_position_ids),
            "seq_idx": bool(self.return_seq_idx),
            "cu_seq_lens": bool(self.return_flash_attn_kwargs),
        }
        packed = None
        if isinstance(features, ArrowBatch):
            packed = _flatten_arrow(features, **options)
            if packed is None:
                features = features.rows()
        if packed is None:
            packed = _native.flatten_batch(features, **options)
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
) -> dict | None:
    """What `_native.flatten_batch` gives for the batch's rows, read from Arrow: the sequences
    are padded (right, int64) in one native call and packed from there with numpy. None where
    the row path might not give the same: an error (its message is the row path's to give),
    float values (truncated there), empty sequences, labels whose lengths differ from the
    inputs', sizes that overflow, or options that are not plain ints."""
    import pyarrow as pa

    if not (_is_int64(separator_id) and _is_int64(position_ids_start)):
        return None
    schema = batch.source.dataset.data.table.schema
    keys = ["input_ids", "labels"] if labels else ["input_ids"]
    for key in keys:
        # Lists of integers or bools (the Arrow path reads no other lists).
        value_type = getattr(schema.field(key).type, "value_type", None)
        if value_type is None or not (
            pa.types.is_integer(value_type) or pa.types.is_boolean(value_type)
        ):
            return None
    groups = [("input_ids", 0, "longest", None, None, False, [], _IDS_MASK)]
    if labels:
        groups.append(("labels", 0, "longest", None, None, False, [], _LABELS_MASK))
    try:
        native = batch.collate(
            groups, float32=False, dtypes=dict.fromkeys(keys, "int64"), keys=keys
        )
    except (ValueError, TypeError, IndexError, OverflowError):
        return None
    mask = native[_IDS_MASK].astype(bool)
    lengths = mask.sum(axis=1)
    if lengths.size == 0 or not lengths.all():
        return None
    label_mask = None
    if labels:
        label_mask = native[_LABELS_MASK].astype(bool)
        if not np.array_equal(label_mask.sum(axis=1), lengths):
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
    input_ids = native["input_ids"][mask]
    label_values = native["labels"][label_mask] if labels else input_ids.copy()
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
