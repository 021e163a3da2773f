"""Drop-ins for the rest of transformers' collator family, on the Rust core:
DataCollatorForTokenClassification, DataCollatorForSeq2Seq, DataCollatorWithFlattening and
DataCollatorForLanguageModeling. Same names, fields and outputs as transformers 5.x.

Each also collates an `ArrowBatch` (a batch of `fastcollate.ArrowBatches`) straight from the
dataset's Arrow buffers, giving exactly what the same rows give on the row path."""

from __future__ import annotations

import multiprocessing as mp
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _native
from ._arrow import ArrowBatch, collate
from ._collators import DefaultDataCollator
from ._padding import PadSettings, main_group, pad, padding_strategy, resolve_padding
from ._rows import first_row
from ._tensors import batch_encoding, convert, is_torch_tensor, torch_module

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
    strategy, max_length = resolve_padding(settings, padding, max_length)
    group = main_group(settings, strategy, max_length, pad_to_multiple_of, None)
    if label_follower is not None:
        group = (*group[:6], [*group[6], label_follower], group[7])
    groups = [group] if label_group is None else [group, label_group]
    native = collate(
        features,
        groups,
        float32=return_tensors == "pt",
        dtypes=dtypes,
        keys=keys,
    )
    return convert(native, return_tensors)


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
            label_follower=(label_name, self.label_pad_token_id, False),
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
            has_labels = any(row.get(label_name) is not None for row in features)
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
                    self.label_pad_token_id,
                    "max_length" if max_padding else "longest",
                    self.max_length if max_padding else None,
                    self.pad_to_multiple_of,
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
            "separator_id": separator_id,
            "position_ids_start": self.position_ids_start,
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


# --- Language modeling -------------------------------------------------------------------------

_MASKING: list = []


def _masking_impl():
    """Where the masking code comes from: transformers' own DataCollatorForLanguageModeling
    when it is installed (so equal seeds give equal masks with whatever version is installed),
    else the copy below."""
    if not _MASKING:
        try:
            from transformers.data.data_collator import DataCollatorForLanguageModeling as impl
        except ImportError:  # pragma: no cover - depends on the environment
            impl = _Masking
        _MASKING.append(impl)
    return _MASKING[0]


def _base_special_tokens_mask():
    try:
        from transformers.tokenization_utils_base import PreTrainedTokenizerBase
    except ImportError:  # pragma: no cover - depends on the environment
        return None
    return PreTrainedTokenizerBase.get_special_tokens_mask


def _to_numpy(x) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return np.array(x)


class _Masking:
    """transformers 5.x's masking code (Apache-2.0, `transformers/data/data_collator.py`),
    used only when transformers is not installed. Called with the collator as `self`."""

    def torch_mask_tokens(self, inputs, special_tokens_mask=None, offset_mapping=None):
        import torch

        labels = inputs.clone()
        probability_matrix = torch.full(labels.shape, self.mlm_probability)
        if special_tokens_mask is None:
            special_tokens_mask = [
                self.tokenizer.get_special_tokens_mask(val, already_has_special_tokens=True)
                for val in labels.tolist()
            ]
        if self.whole_word_mask:
            word_ids, no_mask_mask = self._calc_word_ids_and_prob_mask(
                _to_numpy(offset_mapping), _to_numpy(special_tokens_mask)
            )
            no_mask_mask = torch.tensor(no_mask_mask, dtype=torch.bool)
        else:
            no_mask_mask = (
                special_tokens_mask.bool()
                if isinstance(special_tokens_mask, torch.Tensor)
                else torch.tensor(special_tokens_mask, dtype=torch.bool)
            )
        probability_matrix.masked_fill_(no_mask_mask, value=0.0)
        masked_indices = torch.bernoulli(probability_matrix, generator=self.generator).bool()
        if self.whole_word_mask:
            masked_indices = torch.BoolTensor(self._whole_word_mask(word_ids, masked_indices))
        labels[~masked_indices] = -100
        indices_replaced = (
            torch.bernoulli(
                torch.full(labels.shape, self.mask_replace_prob), generator=self.generator
            ).bool()
            & masked_indices
        )
        inputs[indices_replaced] = self.tokenizer.convert_tokens_to_ids(self.tokenizer.mask_token)
        if self.mask_replace_prob == 1 or self.random_replace_prob == 0:
            return inputs, labels
        random_replace_prob_scaled = self.random_replace_prob / (1 - self.mask_replace_prob)
        indices_random = (
            torch.bernoulli(
                torch.full(labels.shape, random_replace_prob_scaled), generator=self.generator
            ).bool()
            & masked_indices
            & ~indices_replaced
        )
        random_words = torch.randint(
            len(self.tokenizer), labels.shape, dtype=torch.long, generator=self.generator
        )
        inputs[indices_random] = random_words[indices_random]
        return inputs, labels

    def numpy_mask_tokens(self, inputs, special_tokens_mask=None, offset_mapping=None):
        labels = np.copy(inputs)
        probability_matrix = np.full(labels.shape, self.mlm_probability)
        if special_tokens_mask is None:
            special_tokens_mask = [
                self.tokenizer.get_special_tokens_mask(val, already_has_special_tokens=True)
                for val in labels.tolist()
            ]
        if self.whole_word_mask:
            word_ids, no_mask_mask = self._calc_word_ids_and_prob_mask(
                _to_numpy(offset_mapping), _to_numpy(special_tokens_mask)
            )
        else:
            no_mask_mask = (
                special_tokens_mask.astype(bool)
                if isinstance(special_tokens_mask, np.ndarray)
                else np.array(special_tokens_mask, dtype=bool)
            )
        probability_matrix[no_mask_mask] = 0
        rng = self.generator if self.generator else np.random
        masked_indices = rng.binomial(1, probability_matrix, size=probability_matrix.shape).astype(
            bool
        )
        if self.whole_word_mask:
            masked_indices = self._whole_word_mask(word_ids, masked_indices)
        labels[~masked_indices] = -100
        indices_replaced = (
            rng.binomial(1, self.mask_replace_prob, size=labels.shape).astype(bool) & masked_indices
        )
        inputs[indices_replaced] = self.tokenizer.mask_token_id
        if self.mask_replace_prob == 1 or self.random_replace_prob == 0:
            return inputs, labels
        random_replace_prob_scaled = self.random_replace_prob / (1 - self.mask_replace_prob)
        indices_random = (
            rng.binomial(1, random_replace_prob_scaled, size=labels.shape).astype(bool)
            & masked_indices
            & ~indices_replaced
        )
        count = np.count_nonzero(indices_random)
        if self.generator:
            random_words = self.generator.integers(
                low=0, high=len(self.tokenizer), size=count, dtype=np.int64
            )
        else:
            random_words = np.random.randint(
                low=0, high=len(self.tokenizer), size=count, dtype=np.int64
            )
        inputs[indices_random] = random_words
        return inputs, labels

    @staticmethod
    def _calc_word_ids_and_prob_mask(offsets, special_tokens_mask):
        token_starts = offsets[:, :, 0]
        token_ends = offsets[:, :, 1]
        prev_token_ends = np.roll(token_ends, 1, axis=1)
        prev_token_ends[:, 0] = -1
        prev_token_special = np.roll(special_tokens_mask, 1, axis=1)
        prev_token_special[:, 0] = 0
        special_tokens_mask = special_tokens_mask.astype(bool)
        is_new_word = (~special_tokens_mask) & (
            (token_starts != prev_token_ends) | (prev_token_special == 1)
        )
        word_ids = np.cumsum(is_new_word, axis=1)
        word_ids[special_tokens_mask] = -1
        return word_ids, ~is_new_word

    @staticmethod
    def _whole_word_mask(word_ids, mask):
        mask = _to_numpy(mask)
        valid_ids = word_ids != -1
        same_word = (
            (word_ids[:, :, None] == word_ids[:, None, :])
            & valid_ids[:, :, None]
            & valid_ids[:, None, :]
        )
        return np.any(same_word & mask[:, None, :], axis=2)


def _no_pad_token_error(tokenizer) -> ValueError:
    return ValueError(
        "You are attempting to pad samples but the tokenizer you are using"
        f" ({tokenizer.__class__.__name__}) does not have a pad token."
    )


def _collate_sequences(examples: list, tokenizer: Any, pad_to_multiple_of, return_tensors: str):
    """transformers' `_torch_collate_batch` / `_numpy_collate_batch` for rows that are bare
    sequences of ids: padded to the longest (rounded up to `pad_to_multiple_of`) with the pad
    token on the tokenizer's padding side. Lists become int64; numpy / torch rows keep the
    first row's dtype (torch rows: also numpy rows under "pt" become int64, as there)."""
    first = examples[0]
    pt = return_tensors == "pt"
    as_int64 = isinstance(first, (list, tuple)) or (pt and isinstance(first, np.ndarray))
    try:
        lengths = [len(example) for example in examples]
    except TypeError as err:
        raise TypeError(
            "each example must be a mapping or a sequence of token ids; "
            f"got a {type(first).__name__} ({err})"
        ) from err
    needs_padding = any(length != lengths[0] for length in lengths) or (
        pad_to_multiple_of is not None and lengths[0] % pad_to_multiple_of != 0
    )
    if needs_padding and tokenizer.pad_token is None:
        raise _no_pad_token_error(tokenizer)
    pad_id = tokenizer.pad_token_id if needs_padding else 0
    group = (
        "input_ids",
        pad_id,
        "longest" if needs_padding else "do_not_pad",
        None,
        pad_to_multiple_of,
        tokenizer.padding_side != "right",
        [],
        None,
    )
    native = _native.collate(
        {"input_ids": examples},
        [group],
        float32=False,
        dtypes={"input_ids": "int64"} if as_int64 else None,
    )
    input_ids = native["input_ids"]
    if not isinstance(input_ids, np.ndarray):
        raise TypeError("'input_ids' holds values that are not numbers")
    if pt:
        torch = torch_module()
        tensor = torch.from_numpy(input_ids)
        if is_torch_tensor(first) and tensor.dtype != first.dtype:
            tensor = tensor.to(first.dtype)
        return tensor
    if not as_int64:
        dtype = first.dtype if isinstance(first, np.ndarray) else _to_numpy(first[:0]).dtype
        if input_ids.dtype != dtype:
            input_ids = input_ids.astype(dtype)
    return input_ids


@dataclass
class DataCollatorForLanguageModeling(_TakesArrowBatches):
    """Same fields and output as `transformers.DataCollatorForLanguageModeling`. Padding runs on
    the Rust core; masking is transformers' own code (called with this collator), so under the
    same seed (`seed=`, or the global torch / numpy RNG) masks and labels are identical. The
    special-tokens mask, when the rows carry none, is computed in one vectorized step for
    tokenizers that use transformers' default `get_special_tokens_mask`.

    Unlike transformers, bare torch-tensor rows are padded under return_tensors="np"
    (transformers raises there)."""

    tokenizer: Any
    mlm: bool = True
    whole_word_mask: bool = False
    mlm_probability: float | None = 0.15
    mask_replace_prob: float = 0.8
    random_replace_prob: float = 0.1
    pad_to_multiple_of: int | None = None
    return_tensors: str = "pt"
    seed: int | None = None

    def __post_init__(self):
        if self.mlm:
            if self.tokenizer.mask_token is None:
                raise ValueError(
                    "This tokenizer does not have a mask token which is necessary for masked "
                    "language modeling. You should pass `mlm=False` to train on causal language "
                    "modeling instead."
                )
            if self.mlm_probability is None or not 0 <= self.mlm_probability <= 1:
                raise ValueError("mlm_probability should be between 0 and 1.")
            self.mlm_probability = float(self.mlm_probability)
        elif self.whole_word_mask:
            raise ValueError(
                "Whole word masking can only be used with mlm=True."
                "If you want to use whole word masking, please set mlm=True."
            )
        if self.mask_replace_prob + self.random_replace_prob > 1:
            raise ValueError(
                "The sum of mask_replace_prob and random_replace_prob should not exceed 1"
            )
        if not 0 <= self.mask_replace_prob <= 1:
            raise ValueError("mask_replace_prob should be between 0 and 1.")
        if not 0 <= self.random_replace_prob <= 1:
            raise ValueError("random_replace_prob should be between 0 and 1.")
        if self.whole_word_mask:
            if not getattr(self.tokenizer, "is_fast", False):
                warnings.warn(
                    "Whole word masking depends on offset mapping which is only natively "
                    "available with fast tokenizers.",
                    UserWarning,
                    stacklevel=2,
                )
            if self.mask_replace_prob < 1:
                warnings.warn(
                    "Random token replacement is not supported with whole word masking. "
                    "Setting mask_replace_prob to 1.",
                    stacklevel=2,
                )
                self.mask_replace_prob = 1
                self.random_replace_prob = 0
        self.mask_replace_prob = float(self.mask_replace_prob)
        self.random_replace_prob = float(self.random_replace_prob)
        self.generator = None

    _batch_methods = ("__call__", "torch_call", "numpy_call", "_collate")

    def __call__(self, features, return_tensors=None):
        if return_tensors is None:
            return_tensors = self.return_tensors
        if _framework(return_tensors) == "pt":
            return self.torch_call(features)
        return self.numpy_call(features)

    def get_generator(self, seed):
        """A torch Generator ("pt") or numpy Generator seeded with `seed`, as transformers'."""
        if self.return_tensors == "pt":
            return torch_module().Generator().manual_seed(seed)
        return np.random.default_rng(seed)

    def create_rng(self):
        """Seeds `self.generator` from `seed` (per DataLoader worker), as transformers' does."""
        if mp.current_process().name == "MainProcess":
            self.generator = self.get_generator(self.seed)
            return
        # In a DataLoader worker each worker gets seed + its id, as transformers does.
        worker_info = torch_module().utils.data.get_worker_info()
        if worker_info is None:
            raise ValueError(
                "Worker process information is not available for seeding the generator. The "
                "`seed` parameter can only be used in a single process or in a PyTorch "
                "DataLoader with multiple workers."
            )
        self.generator = self.get_generator(self.seed + worker_info.id)

    def _collate(self, examples, return_tensors: str):
        if self.seed is not None and self.generator is None:
            self.create_rng()
        if isinstance(examples, Mapping):
            raise TypeError("a collator takes a list of rows, not a mapping")
        arrow = isinstance(examples, ArrowBatch)
        if not isinstance(examples, (list, tuple)) and not arrow:
            examples = list(examples)
        if not len(examples):
            raise ValueError("cannot collate an empty batch: no rows were given")
        # An ArrowBatch's rows are mappings; pad() reads them from Arrow.
        if arrow or isinstance(examples[0], Mapping):
            batch = pad(
                examples,
                self.tokenizer,
                return_tensors=return_tensors,
                pad_to_multiple_of=self.pad_to_multiple_of,
            )
        else:
            batch = {
                "input_ids": _collate_sequences(
                    examples, self.tokenizer, self.pad_to_multiple_of, return_tensors
                )
            }
        special_tokens_mask = batch.pop("special_tokens_mask", None)
        offset_mapping = batch.pop("offset_mapping", None)
        return batch, special_tokens_mask, offset_mapping

    def torch_call(self, examples):
        """The padded (and, with `mlm`, masked) batch as torch tensors."""
        batch, special_tokens_mask, offset_mapping = self._collate(examples, "pt")
        if self.mlm:
            if special_tokens_mask is None:
                special_tokens_mask = self._special_tokens_mask(batch["input_ids"])
            batch["input_ids"], batch["labels"] = self.torch_mask_tokens(
                batch["input_ids"],
                special_tokens_mask=special_tokens_mask,
                offset_mapping=offset_mapping,
            )
        else:
            labels = batch["input_ids"].clone()
            if self.tokenizer.pad_token_id is not None:
                labels[labels == self.tokenizer.pad_token_id] = -100
            batch["labels"] = labels
        return batch

    def numpy_call(self, examples):
        """The padded (and, with `mlm`, masked) batch as numpy arrays."""
        batch, special_tokens_mask, offset_mapping = self._collate(examples, "np")
        if self.mlm:
            if special_tokens_mask is None:
                special_tokens_mask = self._special_tokens_mask(batch["input_ids"])
            batch["input_ids"], batch["labels"] = self.numpy_mask_tokens(
                batch["input_ids"],
                special_tokens_mask=special_tokens_mask,
                offset_mapping=offset_mapping,
            )
        else:
            labels = np.copy(batch["input_ids"])
            if self.tokenizer.pad_token_id is not None:
                labels[labels == self.tokenizer.pad_token_id] = -100
            batch["labels"] = labels
        return batch

    def _special_tokens_mask(self, input_ids):
        """The mask `tokenizer.get_special_tokens_mask(row, already_has_special_tokens=True)`
        gives for every row (membership in `all_special_ids`), computed in one vectorized
        step. None (masking then asks the tokenizer row by row) when the tokenizer has its own
        get_special_tokens_mask or the ids are not integers."""
        base = _base_special_tokens_mask()
        if base is None or type(self.tokenizer).get_special_tokens_mask is not base:
            return None
        special_ids = sorted({int(i) for i in self.tokenizer.all_special_ids if i is not None})
        if isinstance(input_ids, np.ndarray):
            if input_ids.dtype.kind not in "iu":
                return None
            return np.isin(input_ids, np.array(special_ids, dtype=np.int64)).astype(np.int64)
        torch = torch_module()
        if input_ids.dtype not in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
            return None
        ids = torch.tensor(special_ids, dtype=torch.int64)
        return torch.isin(input_ids.to(torch.int64), ids).to(torch.int64)

    def torch_mask_tokens(self, inputs, special_tokens_mask=None, offset_mapping=None):
        """Masked-LM inputs and labels from padded `inputs` (modified in place)."""
        return _masking_impl().torch_mask_tokens(
            self, inputs, special_tokens_mask=special_tokens_mask, offset_mapping=offset_mapping
        )

    def numpy_mask_tokens(self, inputs, special_tokens_mask=None, offset_mapping=None):
        """Masked-LM inputs and labels from padded `inputs` (modified in place)."""
        return _masking_impl().numpy_mask_tokens(
            self, inputs, special_tokens_mask=special_tokens_mask, offset_mapping=offset_mapping
        )

    @staticmethod
    def _calc_word_ids_and_prob_mask(offsets, special_tokens_mask):
        return _masking_impl()._calc_word_ids_and_prob_mask(offsets, special_tokens_mask)

    @staticmethod
    def _whole_word_mask(word_ids, mask):
        return _masking_impl()._whole_word_mask(word_ids, mask)
