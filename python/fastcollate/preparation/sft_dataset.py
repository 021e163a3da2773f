"""`prepare_tokenized_sft_dataset`: what TRL 1.16's `SFTTrainer._prepare_dataset` does to a
dataset that already holds `input_ids`, as column operations over the Arrow buffers.

TRL runs three per-example `Dataset.map` / `filter` passes in Python: labels from the masks,
truncation to `max_length`, and dropping rows left without a label. Here each is a few numpy
passes over a column's offsets and values, with the row pieces copied out by the Rust core
(`_native.pack_dataset_gather`); packing and shuffling are the same calls TRL makes (packing on
fastcollate's `pack_dataset`). The result is the dataset TRL returns: same columns in the same
order, same values, features and format.
"""

from __future__ import annotations

import hashlib
import operator
from typing import Any, cast

import datasets
import numpy as np
import pyarrow as pa

from .. import _native
from .pack_dataset import STRATEGIES, build_lists, output_features, pack_dataset

TRUNCATION_MODES = ("keep_start", "keep_end")
MASK_COLUMNS = ("completion_mask", "assistant_masks")
IGNORE_INDEX = -100


def prepare_tokenized_sft_dataset(
    dataset: Any,
    *,
    completion_only_loss: bool | None = None,
    max_length: int | None = 1024,
    truncation_mode: str = "keep_start",
    packing: bool = False,
    packing_strategy: str = "bfd",
    shuffle_dataset: bool = False,
    seed: int = 42,
    dataset_num_proc: int | None = None,
) -> Any:
    r"""The dataset `SFTTrainer` trains on, from one that is already tokenized: TRL 1.16's
    `SFTTrainer._prepare_dataset` after its tokenization step, without a per-row Python loop.

    The options are `SFTConfig`'s, with its defaults. In TRL's order:

    1. Labels, unless the dataset has a `labels` column: each token's id where every applicable
       mask is set, -100 elsewhere. `assistant_masks` always applies; `completion_mask` only
       with `completion_only_loss`. The masks used are removed; `labels` comes last. With no
       mask, the labels are the `input_ids`. Like TRL (which zips the columns), a row's labels
       are as long as the shortest of `input_ids` and its masks.
    2. Unless packing, with `max_length`: `input_ids` and `labels` cut to `max_length` (the
       first tokens with `"keep_start"`, the last with `"keep_end"`; other columns are left
       as they are, as in TRL), then rows whose labels are all -100 (or empty) dropped.
    3. With `packing`: `input_ids` and `labels` only, shuffled when `shuffle_dataset`, then
       `pack_dataset(dataset, max_length, packing_strategy)` (fastcollate's, TRL's result).
    4. Shuffled with `seed` when `shuffle_dataset`.

    Args:
        dataset: a `datasets.Dataset` with an `input_ids` column (lists of integers); it is not
            changed. Tokenizing, chat templates and formatting functions stay TRL's.
        completion_only_loss: whether `completion_mask` limits the labels. `None` (TRL's
            default) means what `SFTTrainer` decides from the dataset's first row: true only
            when the dataset has both `prompt` and `completion` columns.
        max_length: the longest sequence kept (a positive int), or `None`.
        truncation_mode: `"keep_start"` or `"keep_end"`.
        packing: pack instead of truncating (needs `max_length`).
        packing_strategy: `"bfd"`, `"bfd_split"` or `"wrapped"`.
        shuffle_dataset: shuffle with `seed` (before packing too, as TRL does).
        seed: the shuffle's seed.
        dataset_num_proc: `SFTConfig.dataset_num_proc`; only packing depends on it (TRL packs
            each process's shard apart).

    Returns:
        A `datasets.Dataset` with the input's format.

    Raises:
        ValueError: no `input_ids` column, a dataset with a custom transform (TRL's error), a
            null row or value (the column and row are named), `max_length` below 1, an unknown
            `truncation_mode` or `packing_strategy`, packing without `max_length`.
        TypeError: a dataset that is not a `datasets.Dataset`, or a column that does not hold
            lists of integers (masks: integers, bools or floats).
    """
    if not isinstance(dataset, datasets.Dataset):
        raise TypeError(
            f"prepare_tokenized_sft_dataset needs a datasets.Dataset, not "
            f"{type(dataset).__name__} (iterable datasets are not supported; use TRL's "
            f"SFTTrainer for them)"
        )
    max_length = _checked_max_length(max_length)
    if truncation_mode not in TRUNCATION_MODES:
        raise ValueError(
            f"Unsupported truncation mode: {truncation_mode!r}, expected 'keep_start' or 'keep_end'"
        )
    if packing and packing_strategy not in STRATEGIES:
        raise ValueError(
            f"Invalid packing strategy {packing_strategy!r}, must be one of {STRATEGIES}."
        )
    if packing and max_length is None:
        raise ValueError("When packing is enabled, `max_length` can't be `None`.")
    if dataset.format["type"] == "custom":
        raise ValueError(
            "SFTTrainer cannot prepare a dataset that uses `Dataset.with_transform()` (TRL "
            "refuses it too: `map` would read through the transform); materialize it with "
            "`Dataset.map()` first"
        )
    columns = dataset.column_names
    if "input_ids" not in columns:
        raise ValueError(
            "the dataset has no 'input_ids' column: prepare_tokenized_sft_dataset takes a "
            "tokenized dataset (tokenizing, chat templates and formatting stay TRL's: pass "
            "the raw dataset to SFTTrainer for them)"
        )
    if completion_only_loss is None:
        completion_only_loss = "prompt" in columns and "completion" in columns

    truncate = max_length is not None and not packing
    prepared = _labelled_and_truncated(
        dataset, bool(completion_only_loss), max_length if truncate else None, truncation_mode
    )
    if packing:
        assert max_length is not None
        prepared = prepared.select_columns(["input_ids", "labels"])
        if shuffle_dataset:
            prepared = prepared.shuffle(seed=seed)
        prepared = pack_dataset(
            prepared, max_length, packing_strategy, {"num_proc": dataset_num_proc}
        )
    if shuffle_dataset:
        prepared = prepared.shuffle(seed=seed)
    return prepared


def _checked_max_length(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, (bool, float)):
        raise TypeError(f"max_length must be an int or None, not {type(value).__name__}")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"max_length must be an int or None, not {type(value).__name__}") from None
    if value < 1:
        # TRL slices with it: 0 keeps every token with "keep_end", a negative value cuts from
        # the other end. Neither is a length.
        raise ValueError(f"max_length must be a positive int or None, got {value}")
    return cast(int, value)  # an int: operator.index gave it


class _ListColumn:
    """A list column's offsets (int64, from 0) and values (numpy, the rows' values end to end),
    read from the Arrow buffers; the values are a view where Arrow's layout allows."""

    def __init__(self, table: Any, name: str, kinds: str) -> None:
        chunked = table.column(name)
        kind = chunked.type
        if not (pa.types.is_list(kind) or pa.types.is_large_list(kind)):
            raise TypeError(f"column '{name}' is {kind}; it must hold lists (one list a row)")
        value_type = kind.value_type
        allowed = (
            pa.types.is_integer(value_type)
            or ("b" in kinds and pa.types.is_boolean(value_type))
            or ("f" in kinds and pa.types.is_floating(value_type))
        )
        if not allowed:
            what = "integers" if kinds == "i" else "integers, bools or floats"
            raise TypeError(f"column '{name}' holds {value_type} values; it must hold {what}")
        self.name = name
        self.type = kind
        self.large = pa.types.is_large_list(kind)
        if chunked.num_chunks == 1:
            array = chunked.chunk(0)
        elif chunked.num_chunks == 0:
            array = pa.array([], type=kind)
        else:
            array = chunked.combine_chunks()
        if array.null_count:
            row = int(np.flatnonzero(array.is_null().to_numpy(zero_copy_only=False))[0])
            raise ValueError(f"'{name}' in row {row} is null; every row needs a list")
        offsets_dtype = np.int64 if self.large else np.int32
        buffer = array.buffers()[1]
        raw = np.frombuffer(buffer, dtype=offsets_dtype) if buffer is not None else None
        if raw is None or len(raw) == 0:
            offsets = np.zeros(len(array) + 1, dtype=np.int64)
        else:
            offsets = raw[array.offset : array.offset + len(array) + 1].astype(np.int64)
        base, end = int(offsets[0]), int(offsets[-1])
        values = array.values.slice(base, end - base)
        if values.null_count:
            position = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0])
            row = int(np.searchsorted(offsets - base, position, side="right")) - 1
            raise ValueError(
                f"'{name}' in row {row} holds a null at position "
                f"{position - int(offsets[row]) + base}; only numbers can be prepared"
            )
        self.offsets = offsets - base
        self.values = values.to_numpy(zero_copy_only=False)
        self.arrow_values = values
        self.lengths = np.diff(self.offsets)

    def pieces(self, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """The values of the pieces `starts[i] .. starts[i] + lengths[i]`, end to end."""
        return _gather(self.values, starts, lengths)


def _gather(values: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    values = np.ascontiguousarray(values)
    raw = values.reshape(-1).view(np.uint8)
    out = _native.pack_dataset_gather(
        np.ascontiguousarray(starts, dtype=np.int64),
        np.ascontiguousarray(lengths, dtype=np.int64),
        raw,
        values.dtype.itemsize,
    )
    return out.view(values.dtype)


def _window(
    offsets: np.ndarray, lengths: np.ndarray, max_length: int, mode: str
) -> tuple[np.ndarray, np.ndarray]:
    """Each row's piece after TRL's slice (`[:max_length]` or `[-max_length:]`)."""
    kept = np.minimum(lengths, max_length)
    starts = offsets[:-1] if mode == "keep_start" else offsets[:-1] + (lengths - kept)
    return starts, kept


def _lists(like_large: bool, offsets: np.ndarray, values: Any) -> Any:
    if like_large:
        return build_lists(pa.LargeListArray, pa.int64(), offsets, values)
    return build_lists(pa.ListArray, pa.int32(), offsets, values)


def _arrow_values(values: np.ndarray, value_type: Any) -> Any:
    return pa.array(values, type=value_type)


def _offsets(lengths: np.ndarray) -> np.ndarray:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


def _build_labels(table: Any, masks: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """TRL's `build_labels`: (offsets, int64 values) of the labels of every row."""
    ids = _ListColumn(table, "input_ids", "i")
    mask_columns = [_ListColumn(table, name, "ibf") for name in masks]
    _check_fits_int64(ids)
    lengths = ids.lengths
    for mask in mask_columns:
        lengths = np.minimum(lengths, mask.lengths)
    aligned = all(np.array_equal(mask.offsets, ids.offsets) for mask in mask_columns)
    if aligned and np.array_equal(lengths, ids.lengths):
        token_ids = ids.values.astype(np.int64, copy=False)
        keep = [mask.values.astype(bool, copy=False) for mask in mask_columns]
        offsets = ids.offsets
    else:
        token_ids = ids.pieces(ids.offsets[:-1], lengths).astype(np.int64, copy=False)
        keep = [
            mask.pieces(mask.offsets[:-1], lengths).astype(bool, copy=False)
            for mask in mask_columns
        ]
        offsets = _offsets(lengths)
    if not keep:
        return offsets, token_ids
    selected = keep[0] if len(keep) == 1 else np.logical_and.reduce(keep)
    return offsets, np.where(selected, token_ids, IGNORE_INDEX)


def _check_fits_int64(ids: _ListColumn) -> None:
    if ids.values.dtype == np.uint64 and len(ids.values) and ids.values.max() > 2**63 - 1:
        position = int(np.argmax(ids.values > 2**63 - 1))
        row = int(np.searchsorted(ids.offsets, position, side="right")) - 1
        raise ValueError(
            f"'input_ids' in row {row} holds a token id above int64's range; labels are int64"
        )


def _labelled_and_truncated(
    dataset: Any, completion_only_loss: bool, max_length: int | None, mode: str
) -> Any:
    names = dataset.column_names
    build = "labels" not in names
    masks = [
        name
        for name in MASK_COLUMNS
        if name in names and (name != "completion_mask" or completion_only_loss)
    ]
    if not build:
        masks = []
    if len(dataset) == 0:
        # `map` never calls TRL's function on no rows: the masks go, no labels come.
        return dataset.remove_columns(masks) if masks else dataset
    if not build and max_length is None:
        return dataset

    table = dataset.with_format("arrow")[:]
    replaced: dict[str, Any] = {}
    if build:
        label_offsets, label_values = _build_labels(table, masks)
        # Python ints are typed int64; rows that are all empty leave nothing to type (TRL's
        # writer types the column null then).
        label_type = pa.int64() if len(label_values) else pa.null()
    else:
        labels = _ListColumn(table, "labels", "i")
        label_offsets, label_values, label_type = labels.offsets, labels.values, labels.type
    keep = None
    if max_length is not None:
        ids = _ListColumn(table, "input_ids", "i")
        if int(ids.lengths.max(initial=0)) > max_length:
            starts, lengths = _window(ids.offsets, ids.lengths, max_length, mode)
            values = _arrow_values(ids.pieces(starts, lengths), ids.type.value_type)
            replaced["input_ids"] = _lists(ids.large, _offsets(lengths), values)
        label_lengths = np.diff(label_offsets)
        if int(label_lengths.max(initial=0)) > max_length:
            starts, lengths = _window(label_offsets, label_lengths, max_length, mode)
            label_values = _gather(label_values, starts, lengths)
            label_offsets = _offsets(lengths)
            if not build:
                replaced["labels"] = _lists(
                    labels.large, label_offsets, _arrow_values(label_values, labels.type.value_type)
                )
        counted = np.zeros(len(label_values) + 1, dtype=np.int64)
        np.cumsum(label_values != IGNORE_INDEX, out=counted[1:])
        keep = counted[label_offsets[1:]] > counted[label_offsets[:-1]]
    if build:
        values = pa.nulls(len(label_values)) if label_type == pa.null() else pa.array(label_values)
        replaced["labels"] = _lists(False, label_offsets, values)

    out_names = [name for name in names if name not in masks]
    if build:
        out_names.append("labels")
    arrays = [replaced[name] if name in replaced else table.column(name) for name in out_names]
    out_table = pa.Table.from_arrays(arrays, names=out_names)
    info = dataset.info.copy()
    info.features = output_features(out_table.schema, dataset.features)
    source = getattr(dataset, "_fingerprint", None)
    key = repr((source, "fastcollate.prepare_tokenized_sft_dataset", masks, max_length, mode))
    fingerprint = hashlib.sha256(key.encode()).hexdigest()[:16]
    prepared = datasets.Dataset(out_table, info=info, split=dataset.split, fingerprint=fingerprint)
    if keep is not None and not keep.all():
        prepared = prepared.select(
            np.flatnonzero(keep),
            new_fingerprint=hashlib.sha256(f"{key}/kept".encode()).hexdigest()[:16],
        )
    return prepared.with_format(**_format(dataset, out_names))


def _format(dataset: Any, out_names: list[str]) -> dict[str, Any]:
    """The format `map` and `filter` hand on (`transmit_format`): the input's type and options;
    its formatted columns, less those removed, plus those added."""
    format: dict[str, Any] = dataset.format
    format.update(format.pop("format_kwargs", {}))
    if dataset._format_columns is not None:
        unformatted = set(dataset.column_names) - set(dataset._format_columns)
        format["columns"] = sorted(set(out_names) - unformatted)
    else:
        format["columns"] = None
    return format
