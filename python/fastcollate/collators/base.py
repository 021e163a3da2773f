"""What the collators share: the "pt" / "np" switch and the calls made of it, the checks on a
batch of rows (or an ArrowBatch), the Arrow-batch opt-out for subclasses, and the one native
call that pads the inputs together with their labels."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from .. import _native
from .._internal.main_input import MainValues, main_input_kind
from .._internal.rows import check_no_later_keys, first_row
from .._internal.stacked_masks import put_back, set_aside_masks
from .._internal.tensors import floats_as_float32
from .._internal.worker_handover import hands_over
from ..arrow import ArrowBatch
from .feature_extraction import processing_kind, transformers_collator
from .native import collate
from .padding_options import PadSettings, padding_group, warn_if_max_length_ignored
from .tokenizer_pad import converted_like_tokenizer_pad

FRAMEWORKS = ("pt", "np")


def framework(return_tensors: Any) -> str:
    """The "pt" / "np" switch of transformers' DataCollatorMixin."""
    value = getattr(return_tensors, "value", return_tensors)
    if value not in FRAMEWORKS:
        raise ValueError(
            f"Framework '{return_tensors}' not recognized! Use return_tensors='pt' or 'np'."
        )
    return cast(str, value)


def batch_rows(features: Any, main_input: str) -> Any:
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


def first_keys(features: Any) -> Any:
    """What `key in first` looks at: the first row, or an ArrowBatch's columns (its rows)."""
    return features.columns if isinstance(features, ArrowBatch) else features[0]


def has_nulls(batch: ArrowBatch, column: str) -> bool:
    """Whether `column` of the batch's source holds a null anywhere (None in a row)."""
    return cast(bool, batch.source.null_count(column) > 0)


class DataCollatorMixin:
    """transformers' `DataCollatorMixin`, for collators written against it: `__call__` hands
    the batch to `torch_call` ("pt") or `numpy_call` ("np"), with the instance's
    `return_tensors` unless the call names one. Like transformers', it defines neither method
    nor `return_tensors`: the subclass does."""

    @hands_over
    def __call__(self, features: Any, return_tensors: Any = None) -> Any:
        if return_tensors is None:
            return_tensors = self.return_tensors  # type: ignore[attr-defined]
        if framework(return_tensors) == "pt":
            return self.torch_call(features)  # type: ignore[attr-defined]
        return self.numpy_call(features)  # type: ignore[attr-defined]


class TokenCollatorCall:
    """`__call__` of a token collator that pads in `_collate(features, return_tensors)`:
    transformers' own collator for a processing class fastcollate does not pad (see
    `transformers_collator`), else `_collate` with the call's `return_tensors` ("pt" / "np"),
    the instance's unless the call names one."""

    @hands_over
    def __call__(self, features: Any, return_tensors: str | None = None) -> Any:
        if (handed_back := transformers_collator(self)) is not None:
            return handed_back(features, return_tensors)
        if return_tensors is None:
            return_tensors = self.return_tensors  # type: ignore[attr-defined]
        return self._collate(features, framework(return_tensors))  # type: ignore[attr-defined]


class TokenCollatorCalls(TokenCollatorCall):
    """`TokenCollatorCall` with transformers' `DataCollatorMixin` methods beside it, for the
    collators whose transformers class has them: `torch_call` and `numpy_call` collate in
    their framework whatever `return_tensors` says (as transformers')."""

    def torch_call(self, features: Any) -> Any:
        """The batch as torch tensors."""
        return self._collate(features, "pt")  # type: ignore[attr-defined]

    def numpy_call(self, features: Any) -> Any:
        """The batch as numpy arrays."""
        return self._collate(features, "np")  # type: ignore[attr-defined]


class TakesArrowBatches:
    """Collators that read an ArrowBatch natively (see `fastcollate.ArrowBatches`). A user
    subclass that replaces one of `_batch_methods` (which receive the batch) may expect a list of
    rows, so it is not handed ArrowBatches."""

    _batch_methods: tuple[str, ...] = ("__call__",)
    _arrow_class: type

    def __init_subclass__(cls, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        if TakesArrowBatches in cls.__bases__:
            cls._arrow_class = cls

    @property
    def accepts_arrow_batches(self) -> bool:
        kind, base = type(self), self._arrow_class
        if processing_kind(getattr(self, "tokenizer", None)) is not None:
            return False  # transformers' own collator takes it, from a list of rows
        return all(getattr(kind, name) is getattr(base, name) for name in self._batch_methods)


def padded_with_labels(
    features: list[Any],
    settings: PadSettings,
    padding: Any,
    max_length: int | None,
    pad_to_multiple_of: int | None,
    return_tensors: str,
    *,
    label_follower: tuple[str, int, bool] | None = None,
    label_group: _native.PadGroup | None = None,
    dtypes: dict[str, Any] | None = None,
    keys: list[Any] | None = None,
) -> dict[str, Any]:
    """One native call: the tokenizer's pad group (plus, for token classification, the labels
    as an independent follower) and, for seq2seq, a separate labels group."""
    group = padding_group(settings, padding, max_length, pad_to_multiple_of, None)
    warn_if_max_length_ignored(padding, max_length)  # as the tokenizer.pad call there warns
    if label_follower is not None:
        key, pad_value, same_length_as_lead = label_follower
        group = group.with_follower(key, pad_value, same_length_as_lead)
    groups = [group] if label_group is None else [group, label_group]
    # Masks of two or more dimensions per row are stacked as they are, not padded (as
    # tokenizer.pad does).
    # The keys outside the labels go through tokenizer.pad in transformers: read as `pad`
    # reads them (numpy scalars and, beside Python-list token ids, arrays keep their dtypes).
    rows = not isinstance(features, ArrowBatch)
    aside = set_aside_masks(features, keys) if rows else None
    if (keys is not None or aside is not None) and isinstance(features, (list, tuple)):
        check_no_later_keys(features)  # the native call is given the keys: checked here
    main_kind = main_input_kind(MainValues(features, settings.main_input)) if rows else None
    keep_arrays = rows and main_kind is None
    native = collate(
        features,
        groups,
        float32=floats_as_float32(return_tensors),
        dtypes=dtypes,
        keys=keys if aside is None else aside.keys,
        **({"keep_arrays": keep_arrays, "keep_numpy_scalars": True} if rows else {}),
    )
    batch = converted_like_tokenizer_pad(native, main_kind, keep_arrays, return_tensors)
    if aside is not None:
        put_back(batch, aside, return_tensors)
    return batch
