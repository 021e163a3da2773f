"""Padding for speech: `feature_extractor.pad()` of transformers' sequence feature extractors
(Wav2Vec2, HuBERT, WavLM, Whisper, ...) and of the processors that forward to it, on the
Rust core.

The usual batches take the native path: rows of float32 / float64 numpy arrays, CPU torch
tensors or lists of floats (raw audio, one dimension; or frames × features, two), padded in one
buffer with `padding_value`, an int32 attention mask (or the rows' own masks, padded in their
dtype), truncation, `pad_to_multiple_of`, every padding strategy and either side. The output is
transformers' `BatchFeature` with the keys, values, shapes and dtypes `feature_extractor.pad`
gives. Anything else — integer or float16 audio, an extractor that overrides `pad`, an option
transformers refuses — is handed to the extractor's own `pad`, so its result (or its error) is
transformers' own."""

from __future__ import annotations

import copy
import sys
from collections.abc import Mapping
from typing import Any, cast

import numpy as np

from .. import _native
from .._internal.rows import check_no_later_keys
from .._internal.tensors import is_torch_tensor, torch_module
from .._internal.upstream import FEATURE_EXTRACTOR_PAD_METHODS

_FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_MASK_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))


def _sequence_feature_extractor_class() -> type | None:
    module = sys.modules.get("transformers.feature_extraction_sequence_utils")
    if module is None:
        return None
    return cast(type, module.SequenceFeatureExtractor)


def is_feature_extractor(processing_class: Any) -> bool:
    """Whether `processing_class` is a transformers sequence feature extractor (checked without
    importing transformers: an object of its classes means it is imported already)."""
    base = _sequence_feature_extractor_class()
    return base is not None and isinstance(processing_class, base)


def _forwards_to_feature_extractor(processing_class: Any) -> bool:
    """Whether `processing_class` is a processor whose `pad(features, **options)` is its feature
    extractor's `pad` (Wav2Vec2's processors, as transformers writes them)."""
    forwarding = []
    for module_name, class_name in (
        ("transformers.models.wav2vec2.processing_wav2vec2", "Wav2Vec2Processor"),
        ("transformers.models.wav2vec2_with_lm.processing_wav2vec2_with_lm",
         "Wav2Vec2ProcessorWithLM"),
    ):
        module = sys.modules.get(module_name)
        if module is not None:
            forwarding.append(getattr(module, class_name).pad)
    pad_method = getattr(type(processing_class), "pad", None)
    return pad_method is not None and any(pad_method is f for f in forwarding) and (
        is_feature_extractor(getattr(processing_class, "feature_extractor", None))
    )


def feature_extractor_of(processing_class: Any) -> Any:
    """The feature extractor whose `pad` transformers' collators reach through
    `processing_class.pad(features, ...)`: the extractor itself, or the one a Wav2Vec2 processor
    forwards to; None for anything else (a tokenizer, an image processor, other processors)."""
    if is_feature_extractor(processing_class):
        return processing_class
    if _forwards_to_feature_extractor(processing_class):
        return processing_class.feature_extractor
    return None


def _uses_base_padding(extractor: Any) -> bool:
    """Whether `extractor` pads as `SequenceFeatureExtractor` does (no override on the way)."""
    base = _sequence_feature_extractor_class()
    kind = type(extractor)
    return all(
        getattr(kind, name, None) is getattr(base, name)
        for name in ("pad", *FEATURE_EXTRACTOR_PAD_METHODS)
    )


class _HandBack(Exception):
    """The batch or its options are not the native path's: the extractor pads it itself."""


def _strategy(padding: Any) -> str:
    if padding is True:
        return "longest"
    if padding is False:
        return "do_not_pad"
    value = getattr(padding, "value", padding)
    if value in ("longest", "max_length", "do_not_pad"):
        return cast(str, value)
    raise _HandBack


def _in_place_readable(array: Any) -> Any:
    """`array` itself when the native module can read it in place (C-contiguous and aligned),
    else a copy that is: a strided view, or raw bytes read at an odd offset
    (`np.frombuffer(raw, np.float32, offset=1)`: contiguous but unaligned), padded as
    transformers pads them (`np.pad` copies them too)."""
    if array.flags.c_contiguous and array.flags.aligned:
        return array
    return np.array(array, order="C")


def _float_rows(key: str, values: list[Any], ndim: int) -> list[Any]:
    """Each row as a C-contiguous, aligned float32 / float64 numpy array of `ndim` dimensions,
    read as transformers' `to_numpy` reads it; `_HandBack` for rows of other dtypes or shapes,
    an error naming the key and the row for values that are no audio at all."""
    if all(isinstance(value, (list, tuple)) and not value for value in values):
        # Only empty lists: transformers looks for a first value to tell the type by and does
        # not find one; what it makes of that (an IndexError today) is its own to say.
        raise _HandBack
    rows = []
    for row, value in enumerate(values):
        if isinstance(value, np.ndarray):
            array = value
        elif is_torch_tensor(value):
            array = value.detach().cpu().numpy()
        elif isinstance(value, (list, tuple)):
            try:
                array = np.array(value)
            except (ValueError, TypeError) as err:
                raise ValueError(f"'{key}' in row {row} cannot be read as numbers: {err}") from err
        else:
            raise TypeError(
                f"'{key}' in row {row} is a {type(value).__name__}; expected a numpy array, a "
                "torch tensor or a list of floats"
            )
        if array.dtype not in _FLOAT_DTYPES:
            if array.dtype.kind in "OSUV":
                raise TypeError(f"'{key}' in row {row} holds {array.dtype} values, not numbers")
            raise _HandBack
        if array.ndim != ndim:
            raise _HandBack
        rows.append(_in_place_readable(array))
    return rows


def _mask_rows(values: list[Any], row_frames: list[Any]) -> list[Any]:
    """The rows' own attention masks as 1-d int32 / int64 arrays of one dtype, each as long as
    its row; `_HandBack` for anything else (transformers decides what it makes of it)."""
    from transformers.utils import to_numpy  # untyped upstream: its calls are ignored

    masks = [to_numpy(value) for value in values]  # type: ignore[no-untyped-call]
    dtype = getattr(masks[0], "dtype", None)
    for mask, frames in zip(masks, row_frames, strict=True):
        if (
            not isinstance(mask, np.ndarray)
            or mask.dtype != dtype
            or dtype not in _MASK_DTYPES
            or mask.ndim != 1
            or len(mask) != frames
        ):
            raise _HandBack
    return [_in_place_readable(mask) for mask in masks]


def _other_values(values: list[Any]) -> list[Any]:
    """A key that is not padded, per row, as transformers' `pad` hands it to `BatchFeature`:
    read with `to_numpy`, float64 made float32."""
    from transformers.utils import to_numpy  # untyped upstream: its calls are ignored

    if isinstance(values[0], (int, float)):
        values = to_numpy(values)  # type: ignore[no-untyped-call]
    elif not isinstance(values, np.ndarray):
        values = [to_numpy(value) for value in values]  # type: ignore[no-untyped-call]
    out = []
    for value in values:
        dtype = getattr(value, "dtype", None)
        if dtype is None:
            # A str, None, ...: transformers' pad fails on it (it reads every value's dtype),
            # with its own error.
            raise _HandBack
        if dtype is np.dtype(np.float64):
            value = value.astype(np.float32)
        out.append(value)
    return out


def _inferred_return_tensors(main_values: list[Any]) -> str:
    """The output transformers' pad picks when `return_tensors` is None, from the same value it
    looks at: row 0's main input, or, where that is a list or tuple, the first value of the
    first row that is not empty (a 0-d tensor there means "pt"). `_HandBack` where it finds no
    such value or one of a type it does not know (transformers raises its own error)."""
    first = main_values[0]
    if isinstance(first, (list, tuple)):
        row = next((value for value in main_values if len(value) != 0), None)
        if row is None:
            raise _HandBack
        first = row[0]
    if is_torch_tensor(first):
        return "pt"
    if isinstance(first, (int, float, list, tuple, np.ndarray)):
        return "np"
    raise _HandBack


def _columns(features: Any) -> dict[str, list[Any]] | None:
    """The batch as a dict of per-row value lists (keys of the first row, as transformers takes
    them); None for what is not a batch of rows (handed back)."""
    if isinstance(features, (list, tuple)):
        if not features or not isinstance(features[0], Mapping):
            return None
        check_no_later_keys(features)
        keys = list(features[0].keys())
        columns: dict[str, list[Any]] = {key: [] for key in keys}
        for row, example in enumerate(features):
            if not isinstance(example, Mapping):
                raise TypeError(f"row {row} is a {type(example).__name__}, not a mapping")
            for key in keys:
                try:
                    columns[key].append(example[key])
                except KeyError:
                    raise KeyError(f"row {row} has no '{key}' (row 0 has it)") from None
        return columns
    if isinstance(features, Mapping):
        columns = {key: features[key] for key in features.keys()}
        if not all(isinstance(v, (list, tuple)) for v in columns.values()):
            return None
        sizes = {len(v) for v in columns.values()}
        if len(sizes) != 1:
            return None
        return {key: list(value) for key, value in columns.items()}
    return None


def pad_features(
    features: Any,
    extractor: Any,
    *,
    padding: Any = True,
    max_length: int | None = None,
    truncation: bool = False,
    pad_to_multiple_of: int | None = None,
    return_attention_mask: bool | None = None,
    return_tensors: Any = None,
    padding_side: str | None = None,
) -> Any:
    """`extractor.pad(features, ...)`, with its result: natively for the usual batches (see the
    module's docstring), by the extractor's own `pad` for the rest. `padding_side` overrides
    the extractor's (transformers' `pad` has no such argument)."""
    options = dict(padding=padding, max_length=max_length, truncation=truncation,
                   pad_to_multiple_of=pad_to_multiple_of,
                   return_attention_mask=return_attention_mask, return_tensors=return_tensors)
    try:
        return _pad_natively(features, extractor, padding_side=padding_side, **options)
    except _HandBack:
        pass
    if padding_side is not None and padding_side != extractor.padding_side:
        # transformers' `pad` reads the side from the extractor: a shallow copy of it carries
        # the override, so the caller's extractor is never changed (another thread may be
        # padding with it).
        extractor = copy.copy(extractor)
        extractor.padding_side = padding_side
    return extractor.pad(features, **options)


def _ragged(strategy: str, frames: list[Any], max_length: int | None, truncation: bool,
            multiple: int | None) -> bool:
    """Whether rows of `frames` frames stay of different lengths: not padded ("do_not_pad"),
    or longer than the "max_length" target and not truncated."""
    def rounded(length: int) -> int:
        return length if multiple is None else -(-length // multiple) * multiple

    if truncation and max_length is not None:
        frames = [min(n, rounded(max_length)) for n in frames]
    if strategy == "do_not_pad":
        return len(set(frames)) > 1
    if strategy == "max_length" and max_length is not None:
        return cast(bool, max(frames) > rounded(max_length))
    return False


def _is_count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _pad_natively(features: Any, extractor: Any, *, padding: Any, max_length: Any,
                  truncation: Any, pad_to_multiple_of: Any, return_attention_mask: Any,
                  return_tensors: Any, padding_side: str | None) -> Any:
    if not _uses_base_padding(extractor):
        raise _HandBack
    strategy = _strategy(padding)
    side = extractor.padding_side if padding_side is None else padding_side
    if side not in ("left", "right"):
        raise _HandBack
    if max_length is not None and not _is_count(max_length):
        raise _HandBack
    if (strategy == "max_length" or truncation) and max_length is None:
        raise _HandBack  # transformers' own error
    if pad_to_multiple_of is not None and not (_is_count(pad_to_multiple_of)
                                               and pad_to_multiple_of > 0):
        raise _HandBack
    try:
        # transformers' pad takes truncation by its truth value (`if not truncation`).
        truncation = bool(truncation)
    except Exception:  # noqa: BLE001 - a value without one: transformers' own error
        raise _HandBack from None
    padding_value = extractor.padding_value
    if strategy != "do_not_pad" and padding_value is None:
        raise _HandBack  # transformers' own error
    if padding_value is None:
        padding_value = 0.0
    elif type(padding_value) not in (int, float):
        raise _HandBack
    columns = _columns(features)
    main = extractor.model_input_names[0]
    if columns is None or main not in columns or not columns[main]:
        raise _HandBack
    main_values = columns[main]
    if return_tensors is None:
        return_tensors = _inferred_return_tensors(main_values)
    return_tensors = getattr(return_tensors, "value", return_tensors)
    if return_tensors not in ("pt", "np"):
        raise _HandBack
    if return_attention_mask is None:
        return_attention_mask = extractor.return_attention_mask
    feature_size = extractor.feature_size
    if type(feature_size) is not int:
        # transformers reads it only where a row needs padding (`feature_size > 1`): rows
        # that need none pass whatever it is, the others fail in its comparison. Its own pad
        # gives both.
        raise _HandBack
    ndim = 2 if feature_size > 1 else 1
    rows = _float_rows(main, main_values, ndim)
    if _ragged(strategy, [len(row) for row in rows], max_length, truncation, pad_to_multiple_of):
        raise _HandBack  # transformers' ragged output (object arrays) or its error
    given_masks = None
    if "attention_mask" in columns:
        if not return_attention_mask:
            raise _HandBack
        given_masks = _mask_rows(columns["attention_mask"], [len(row) for row in rows])
    values, mask = _native.pad_frames(
        main,
        rows,
        ndim=ndim,
        strategy=strategy,
        max_length=max_length,
        pad_to_multiple_of=pad_to_multiple_of,
        truncation=truncation,
        left=side == "left",
        padding_value=float(padding_value),
        attention_mask=bool(return_attention_mask),
        masks=given_masks,
    )
    out: dict[str, Any] = {}
    for key, column in columns.items():
        if key == main:
            out[key] = values
        elif key == "attention_mask":
            out[key] = mask
        else:
            out[key] = _other_values(column)
    if mask is not None and "attention_mask" not in out:
        out["attention_mask"] = mask
    if return_tensors == "pt":
        from_numpy = torch_module().from_numpy
        out[main] = from_numpy(values)
        if mask is not None:
            out["attention_mask"] = from_numpy(mask)
    from transformers.feature_extraction_utils import BatchFeature

    return BatchFeature(out, tensor_type=return_tensors)


# The transformers classes of processing objects that are not tokenizers (module, class name).
_FOREIGN_PROCESSING_CLASSES = (
    ("transformers.feature_extraction_utils", "FeatureExtractionMixin"),
    ("transformers.image_processing_base", "ImageProcessingMixin"),
    ("transformers.image_processing_utils", "BaseImageProcessor"),
    ("transformers.video_processing_utils", "BaseVideoProcessor"),
    ("transformers.processing_utils", "ProcessorMixin"),
)
_KIND_BY_TYPE: dict[type, str | None] = {}


def processing_kind(processing_class: Any) -> str | None:
    """What a collator does with `processing_class`: "feature_extractor" (padded here, see
    `feature_extractor_of`), "transformers" (another transformers processing class — an image
    or video processor, a processor that does not forward to a feature extractor — whose
    collation transformers' own code does) or None (a tokenizer, or anything else fastcollate
    pads as one). Remembered per class."""
    kind_type = type(processing_class)
    try:
        return _KIND_BY_TYPE[kind_type]
    except KeyError:
        pass
    if feature_extractor_of(processing_class) is not None:
        kind: str | None = "feature_extractor"
    else:
        kind = None
        for module_name, class_name in _FOREIGN_PROCESSING_CLASSES:
            module = sys.modules.get(module_name)
            base = getattr(module, class_name, None) if module is not None else None
            if base is not None and isinstance(processing_class, base):
                kind = "transformers"
                break
    _KIND_BY_TYPE[kind_type] = kind
    return kind


def transformers_collator(collator: Any) -> Any:
    """transformers' own collator of `collator`'s class name, built with the fields the two
    share, for a processing class fastcollate's collator does not pad (`processing_kind` not
    None: a feature extractor or another transformers processing class, which these token
    collators leave to transformers); None for a tokenizer. Made once per collator."""
    cached = collator.__dict__.get("_transformers_collator")
    if cached is not None and cached[0] is collator.tokenizer:
        return cached[1]
    if processing_kind(collator.tokenizer) is None:
        return None
    import dataclasses

    from .._internal.patching import original

    name = next(kind.__name__ for kind in type(collator).__mro__
                if kind.__module__.startswith("fastcollate."))
    transformers_class = original("transformers.data.data_collator", name)
    shared = {field.name for field in dataclasses.fields(transformers_class) if field.init}
    values = {field.name: getattr(collator, field.name)
              for field in dataclasses.fields(collator) if field.name in shared}
    built = transformers_class(**values)
    collator.__dict__["_transformers_collator"] = (collator.tokenizer, built)
    return built
