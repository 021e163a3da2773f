"""`pad()`, the drop-in for `tokenizer.pad()`, on the Rust core: a batch of rows, a mapping of
lists, one example or an `ArrowBatch` padded with a tokenizer's settings (or given ones), and
the conversion of the native output that tokenizer.pad's rules call for."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .._internal.main_input import MainValues, is_single_example, main_input_kind
from .._internal.python_values import as_python_values
from .._internal.rows import check_no_later_keys, first_row, missing_main_input
from .._internal.stacked_masks import put_back, set_aside_masks
from .._internal.tensors import (
    PinnedOutputBuffers,
    batch_encoding,
    check_pin_memory,
    check_return_tensors,
    convert,
    floats_as_float32,
    is_torch_tensor,
    output_kind,
    pin_tensors,
    refuse_pinning_in_worker,
    torch_module,
)
from ..arrow import ArrowBatch
from .feature_extraction import feature_extractor_of, pad_features, processing_kind
from .native import collate
from .padding_options import (
    PadSettings,
    check_processing_object,
    padding_group,
    warn_if_max_length_ignored,
)

# What rows come in: a tokenizer argument of one of these is the rows, passed second.
_ROW_CONTAINERS = (list, tuple, dict)


def _not_a_tokenizer(tokenizer: Any, encoded_inputs: Any) -> TypeError:
    given = type(tokenizer).__name__
    if hasattr(encoded_inputs, "pad_token_id") or hasattr(encoded_inputs, "model_input_names"):
        return TypeError(
            f"pad(encoded_inputs, tokenizer) takes the rows first and the tokenizer second: the "
            f"arguments are swapped (encoded_inputs is a {type(encoded_inputs).__name__}, "
            f"tokenizer a {given}); call fastcollate.pad(rows, tokenizer)"
        )
    return TypeError(
        f"pad's tokenizer must be a tokenizer or None, not a {given}; the rows are the first "
        "argument"
    )


def pad(
    encoded_inputs: Any,
    tokenizer: Any = None,
    *,
    padding: bool | str = True,
    max_length: int | None = None,
    pad_to_multiple_of: int | None = None,
    padding_side: str | None = None,
    return_attention_mask: bool | None = None,
    return_tensors: str | None = None,
    pad_token_id: int | None = None,
    pad_token_type_id: int = 0,
    model_input_names: Sequence[str] | None = None,
    verbose: bool = True,
    pin_memory: bool = False,
    truncation: bool = False,
) -> Any:
    """Pads a batch (list of mappings, or mapping of lists) or one example, like
    `tokenizer.pad(...)`, with the same result. The docs page "What differs from
    transformers" lists the differences.

    `encoded_inputs` rows may hold lists/tuples of ints, numpy arrays, CPU torch tensors or
    scalars; an `ArrowBatch` is padded straight from Arrow storage. `padding`, `max_length`,
    `pad_to_multiple_of`, `padding_side`, `return_attention_mask` and `return_tensors`
    (None, "np" or "pt") mean what they mean in `tokenizer.pad`.

    Arguments transformers does not have, for padding without a tokenizer (then the result is
    a dict, and `padding="max_length"` needs `max_length`):

    - `tokenizer`: the tokenizer whose pad token, pad token type, padding side,
      `model_input_names` and `model_max_length` are used; None to pass them as below.
    - `pad_token_id`: the value `input_ids` (the main input) is padded with. Overrides the
      tokenizer's when given; without a tokenizer it is needed whenever padding happens.
    - `pad_token_type_id`: the value `token_type_ids` is padded with (default 0). A
      tokenizer's own value takes precedence.
    - `model_input_names`: the input names, the first being the main input whose length sets
      the padding (default: the tokenizer's, else `("input_ids", "token_type_ids",
      "attention_mask")`); an attention mask is added when "attention_mask" is among them.
    - `padding_side`: "right" (the default without a tokenizer) or "left".

    - `pin_memory`: return the tensors in page-locked host memory (torch's pinned allocator),
      ready for `.to("cuda", non_blocking=True)`. Needs `return_tensors="pt"` and CUDA (else
      it raises before padding anything). Each output is allocated pinned once its size is
      known and the native module copies it there, in place of the copy
      `DataLoader(pin_memory=True)` would make (keys converted in Python are copied there by
      torch).

    `verbose=False` silences the warning `tokenizer.pad` gives for a `max_length` it ignores
    (`padding=True` pads to the longest row).

    `tokenizer` may also be a transformers sequence feature extractor (Wav2Vec2, Whisper, ...)
    or a processor that pads through one: the result is then `feature_extractor.pad(...)`'s
    (see the docs page "Speech"), with `truncation` as it takes it. Other transformers
    processing classes (image processors, other processors) are padded by their own `pad`.
    """
    if type(tokenizer) in _ROW_CONTAINERS:
        raise _not_a_tokenizer(tokenizer, encoded_inputs)
    if tokenizer is not None:
        check_processing_object(tokenizer, "pad's tokenizer")
    if tokenizer is not None and processing_kind(tokenizer) is not None:
        return _pad_with_processing_class(
            encoded_inputs, tokenizer, padding=padding, max_length=max_length,
            pad_to_multiple_of=pad_to_multiple_of, padding_side=padding_side,
            return_attention_mask=return_attention_mask, return_tensors=return_tensors,
            truncation=truncation, pin_memory=pin_memory,
            tokenizer_options=pad_token_id is not None or model_input_names is not None,
        )
    if truncation:
        raise ValueError("truncation=True is taken with a feature extractor only; "
                         "tokenizer.pad does not truncate")
    if verbose:
        warn_if_max_length_ignored(padding, max_length)
    settings = PadSettings.resolve(
        tokenizer,
        pad_token_id=pad_token_id,
        pad_token_type_id=pad_token_type_id,
        padding_side=padding_side,
        model_input_names=model_input_names,
    )
    if type(return_tensors) is not str or return_tensors not in ("pt", "np"):
        return_tensors = check_return_tensors(return_tensors)  # None, TensorType, or an error
    group = padding_group(settings, padding, max_length, pad_to_multiple_of, return_attention_mask)
    main = settings.main_input

    single = False
    # A list of rows first, as tokenizer.pad tests it: the usual batch.
    if isinstance(encoded_inputs, (list, tuple)):
        features: Any = encoded_inputs
        first_row(encoded_inputs, main, "pad")
        main_kind = main_input_kind(MainValues(encoded_inputs, main))
    elif isinstance(encoded_inputs, ArrowBatch):
        # Rows still in Arrow storage: their Python rows hold lists of Python numbers.
        features, main_kind = encoded_inputs.require(main), None
    elif isinstance(encoded_inputs, Mapping):
        if main not in encoded_inputs:
            raise missing_main_input(main, encoded_inputs.keys())
        main_value = encoded_inputs[main]
        single = is_single_example(main_value)
        features = (
            # row[key], not .items(): a mapping subclass may compute its values on access.
            {key: [encoded_inputs[key]] for key in encoded_inputs} if single else encoded_inputs
        )
        main_kind = main_input_kind([main_value] if single else main_value)
    else:
        raise TypeError(
            "pad() takes a list of mappings, a mapping of lists or one example, not "
            f"{type(encoded_inputs).__name__}"
        )
    if return_tensors is None:
        return_tensors = main_kind
    pinned = None
    if pin_memory:
        check_pin_memory(pin_memory, return_tensors)
        refuse_pinning_in_worker()

    # Masks of two or more dimensions per row are stacked as they are, not padded.
    aside = None if single or isinstance(features, ArrowBatch) else set_aside_masks(features)
    if aside is not None:
        if isinstance(features, (list, tuple)):
            check_no_later_keys(features)  # the native call is given the keys: checked here
        features = aside.features
    # With a Python main input, tokenizer.pad leaves other keys' numpy / torch values as they
    # are, for BatchEncoding to stack with their dtypes: the native module hands such keys
    # back as lists of the original values (rows, a mapping of lists, or one example).
    rows = not isinstance(features, ArrowBatch)
    keep_arrays = main_kind is None and rows
    options: dict[str, Any] = {}
    if rows:
        if main_kind is not None:
            # Beside numpy / torch token ids, other keys' numpy scalars keep their dtype too
            # (keep_arrays, above, covers them beside Python lists).
            options["keep_numpy_scalars"] = True
        if return_tensors == "pt":
            options["to_tensor"] = torch_module().from_numpy  # outputs come back as tensors
    if pin_memory:
        options["output_buffer"] = pinned = PinnedOutputBuffers()
    batch = collate(
        features,
        [group],
        float32=floats_as_float32(return_tensors),
        allow_ragged=return_tensors is None,
        keep_arrays=keep_arrays,
        keys=None if aside is None else aside.keys,
        **options,
    )
    if "to_tensor" in options and list not in map(type, batch.values()):
        out = batch  # every key a tensor already
    else:
        out = converted_like_tokenizer_pad(batch, main_kind, keep_arrays, return_tensors,
                                           one_example=single)
    if aside is not None:
        put_back(out, aside, return_tensors)
    if single:
        out = {key: _unbatch(value) for key, value in out.items()}
    if pin_memory:
        pin_tensors(out, pinned)
    return batch_encoding(out)


def _pad_with_processing_class(features: Any, processing_class: Any, *, padding: Any,
                               max_length: Any, pad_to_multiple_of: Any, padding_side: Any,
                               return_attention_mask: Any, return_tensors: Any,
                               truncation: bool, pin_memory: bool,
                               tokenizer_options: bool) -> Any:
    """`pad` with a processing class that is not a tokenizer (`processing_kind`): a feature
    extractor's padding, natively, or the class's own `pad`."""
    if tokenizer_options:
        raise ValueError("pad_token_id and model_input_names are a tokenizer's settings; a "
                         f"{type(processing_class).__name__} pads with its own")
    if pin_memory:
        check_pin_memory(pin_memory, getattr(return_tensors, "value", return_tensors))
    extractor = feature_extractor_of(processing_class)
    if extractor is not None:
        out = pad_features(features, extractor, padding=padding, max_length=max_length,
                           truncation=truncation, pad_to_multiple_of=pad_to_multiple_of,
                           return_attention_mask=return_attention_mask,
                           return_tensors=return_tensors, padding_side=padding_side)
    else:
        if padding_side is not None or truncation:
            raise ValueError(f"a {type(processing_class).__name__} pads with its own side and "
                             "without truncation here: leave padding_side and truncation out")
        out = processing_class.pad(features, padding=padding, max_length=max_length,
                                   pad_to_multiple_of=pad_to_multiple_of,
                                   return_attention_mask=return_attention_mask,
                                   return_tensors=return_tensors)
    if pin_memory:
        pin_tensors(out)
    return out


def converted_like_tokenizer_pad(batch: dict[str, Any], main_kind: str | None, keep_arrays: bool,
                                 return_tensors: str | None,
                                 one_example: bool = False) -> dict[str, Any]:
    """The native output in the requested format, its keys that came back as lists (of Python
    objects, or of ragged rows) converted as tokenizer.pad converts them for a main input of
    `main_kind` (`keep_arrays`: the native call left numpy / torch values as they are;
    `one_example`: the batch is one example's values, one row each)."""
    if main_kind is not None:
        _values_to_python(batch)
    kept: list[str] = []
    if keep_arrays:
        kept = [
            key for key, values in batch.items() if type(values) is list and _holds_arrays(values)
        ]
        if one_example and return_tensors is not None:
            for key in kept:
                batch[key] = _one_example_tensor(key, batch[key][0], return_tensors)
            kept = []
    return convert(batch, return_tensors, stacked_as_batch_encoding=kept)


def _one_example_tensor(key: str, value: Any, return_tensors: str) -> Any:
    """What BatchEncoding makes of one example's numpy / torch value (the value itself, not a
    list of it: a tensor or an array stays as it is), with a batch axis for `_unbatch`."""
    try:
        if return_tensors == "pt":
            torch = torch_module()
            tensor = value if isinstance(value, torch.Tensor) else torch.tensor(value)
            return tensor[None]
        return (value if isinstance(value, np.ndarray) else np.asarray(value))[None]
    except (ValueError, TypeError, RuntimeError) as err:
        raise ValueError(
            f"cannot make {output_kind(return_tensors)} of '{key}' in row 0: {err}"
        ) from err


def _values_to_python(batch: dict[str, Any]) -> None:
    """Keys the native module left as Python objects, converted as tokenizer.pad converts
    every value of a numpy / torch batch first (`as_python_values`): arrays become Python lists
    (so a 2-d float64 tensor becomes torch's default dtype under "pt", as lists of floats
    do), while a key of
    numbers alone keeps its numpy scalars, and their dtype."""
    for key, values in batch.items():
        if not isinstance(values, list):
            continue
        try:
            batch[key] = as_python_values(values)
        except Exception as err:  # noqa: BLE001 - meta / sparse tensors, ...
            raise TypeError(f"'{key}' holds values that cannot be read: {err}") from err


def _holds_arrays(values: list[Any]) -> bool:
    """Whether a key's values (handed back as objects) hold numpy / torch values."""
    return any(
        isinstance(value, (np.ndarray, np.generic)) or is_torch_tensor(value) for value in values
    )


def _unbatch(value: Any) -> Any:
    if isinstance(value, list):
        return value[0]
    return value.reshape(value.shape[1:])
