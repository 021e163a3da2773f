"""`pad()`, the drop-in for `tokenizer.pad()`, and `DataCollatorWithPadding`, on the Rust
core."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .._internal.python_values import as_python_values
from .._internal.rows import first_row, missing_main_input
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
    plain_batch_encoding_class,
    refuse_pinning_in_worker,
    torch_module,
)
from ..arrow import ArrowBatch
from .feature_extraction import feature_extractor_of, pad_features, processing_kind
from .native import collate, collate_plan, collate_rows
from .padding_options import PadSettings, check_padding_options, check_tokenizer, padding_group
from .tokenizer_state import has_state_key, keyed_settings, state_key


def _is_single_example(main_value: Any) -> bool:
    """transformers pads a mapping as one example when its main input is a flat sequence."""
    if isinstance(main_value, np.ndarray) or is_torch_tensor(main_value):
        return main_value.ndim == 1
    if isinstance(main_value, (list, tuple)):
        for item in main_value:
            if isinstance(item, (list, tuple)):
                if len(item):
                    return False
                continue
            if isinstance(item, np.ndarray) or is_torch_tensor(item):
                return item.ndim == 0
            return True
    return False


def main_tensor_kind(main_values: Any) -> str | None:
    """tokenizer.pad's default for numpy / torch inputs: return the same kind. As there, the
    first row's main input decides, or, when it is a list, the first element of the first
    non-empty row."""
    try:
        first = main_values[0]
        if isinstance(first, (list, tuple)):
            for item in main_values:
                if len(item):
                    first = item[0]
                    break
    except (TypeError, IndexError, KeyError):
        return None  # the native module reports what is wrong with the rows
    if isinstance(first, np.ndarray):
        return "np"
    if is_torch_tensor(first):
        return "pt"
    return None


class MainValues:
    """The main input of each row, read on demand (`main_tensor_kind` usually needs
    only row 0)."""

    def __init__(self, rows: Sequence[Any], main: str):
        self.rows, self.main = rows, main

    def __getitem__(self, index: int) -> Any:
        return self.rows[index][self.main]

    def __iter__(self):
        for row in self.rows:
            yield row[self.main] if isinstance(row, Mapping) else []


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
):
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
      known and padded straight into it: no copy after padding (keys converted in Python are
      copied there, the copy `DataLoader(pin_memory=True)` would make).

    `verbose` is accepted as `tokenizer.pad` accepts it; fastcollate prints no warnings.

    `tokenizer` may also be a transformers sequence feature extractor (Wav2Vec2, Whisper, ...)
    or a processor that pads through one: the result is then `feature_extractor.pad(...)`'s
    (see the docs page "Speech"), with `truncation` as it takes it. Other transformers
    processing classes (image processors, other processors) are padded by their own `pad`.
    """
    del verbose
    if type(tokenizer) in _ROW_CONTAINERS:
        raise _not_a_tokenizer(tokenizer, encoded_inputs)
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
        first_main = first_row(encoded_inputs, main, "pad")[main]
        # The usual cases, decided at once: token ids as Python lists, or an array / tensor
        # (whose kind the first row decides, as in `main_tensor_kind`).
        if type(first_main) is list and first_main and type(first_main[0]) is int:
            main_kind = None
        elif isinstance(first_main, np.ndarray):
            main_kind = "np"
        elif is_torch_tensor(first_main):
            main_kind = "pt"
        else:
            main_kind = main_tensor_kind(MainValues(encoded_inputs, main))
    elif isinstance(encoded_inputs, ArrowBatch):
        # Rows still in Arrow storage: their Python rows hold lists of Python numbers.
        features, main_kind = encoded_inputs.require(main), None
    elif isinstance(encoded_inputs, Mapping):
        if main not in encoded_inputs:
            raise missing_main_input(main, encoded_inputs.keys())
        main_value = encoded_inputs[main]
        single = _is_single_example(main_value)
        features = (
            # row[key], not .items(): a mapping subclass may compute its values on access.
            {key: [encoded_inputs[key]] for key in encoded_inputs} if single else encoded_inputs
        )
        main_kind = main_tensor_kind([main_value] if single else main_value)
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


def converted_like_tokenizer_pad(batch: dict, main_kind: str | None, keep_arrays: bool,
                                 return_tensors: str | None, one_example: bool = False) -> dict:
    """The native output in the requested format, its keys that came back as lists (of Python
    objects, or of ragged rows) converted as tokenizer.pad converts them for a main input of
    `main_kind` (`keep_arrays`: the native call left numpy / torch values as they are;
    `one_example`: the batch is one example's values, one row each)."""
    if main_kind is not None:
        _values_to_python(batch)
    kept = ()
    if keep_arrays:
        kept = [
            key for key, values in batch.items() if type(values) is list and _holds_arrays(values)
        ]
        if one_example and return_tensors is not None:
            for key in kept:
                batch[key] = _one_example_tensor(key, batch[key][0], return_tensors)
            kept = ()
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


def _values_to_python(batch: dict) -> None:
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


def _holds_arrays(values: list) -> bool:
    """Whether a key's values (handed back as objects) hold numpy / torch values."""
    return any(
        isinstance(value, (np.ndarray, np.generic)) or is_torch_tensor(value) for value in values
    )


def _unbatch(value: Any) -> Any:
    if isinstance(value, list):
        return value[0]
    return value.reshape(value.shape[1:])


class _CallPlan:
    """What a `DataCollatorWithPadding` call settles before padding, kept for the next call:
    valid while the collator's fields are the same objects and the tokenizer's state key
    (`tokenizer_state.state_key`: the objects transformers stores the pad token, padding side
    and the rest in) compares equal."""

    __slots__ = ("fields", "tokenizer_key", "main", "native_plans", "array_kinds",
                 "default_dtype", "get_default_dtype")

    def __init__(self, fields: tuple, tokenizer_key: tuple, settings: PadSettings, group: tuple,
                 return_tensors: str):
        self.fields = fields
        self.tokenizer_key = tokenizer_key
        self.main = settings.main_input
        # `_native.collate`'s groups and options for each kind of main input (None: Python
        # lists), as `pad` passes them, parsed once; under "pt" the native call builds the
        # tensors.
        # The native call also finishes a batch of arrays / tensors alone (labels renamed, a
        # BatchEncoding made), as `DataCollatorWithPadding.__call__` would.
        # Under "pt", Python floats become torch's default dtype: the plan holds for the
        # default dtype it was made under (None: any).
        self.default_dtype = self.get_default_dtype = None
        if return_tensors == "pt":
            self.get_default_dtype = torch_module().get_default_dtype
            self.default_dtype = self.get_default_dtype()
        common: dict[str, Any] = {
            "float32": floats_as_float32(return_tensors),
            "batch_encoding": plain_batch_encoding_class(),
            "keep_numpy_scalars": True,
        }
        if return_tensors == "pt":
            common["to_tensor"] = torch_module().from_numpy
        self.native_plans = {
            kind: collate_plan([group], **common, keep_arrays=kind is None)
            for kind in (None, "np", "pt")
        }
        # The main input's kind for rows whose token ids are of exactly these classes (torch's
        # where torch is imported; other rows are told apart by `_row_main_kind`).
        self.array_kinds: dict[type, str] = {np.ndarray: "np"}
        torch = sys.modules.get("torch")
        if torch is not None:
            self.array_kinds[torch.Tensor] = "pt"


def _row_main_kind(first: dict, main: str) -> tuple[bool, str | None]:
    """(whether the batch whose row 0 is `first` takes the planned path, its main input's
    kind): token ids as a list of ints, or a numpy array, or a torch tensor; an attention mask
    of at most one dimension (a stacked mask is set aside by `pad`)."""
    value = first.get(main)
    value_type = type(value)
    if value_type is list:
        if not value or type(value[0]) is not int:
            return False, None
        kind = None
    elif value_type is np.ndarray:
        kind = "np"
    elif is_torch_tensor(value):
        kind = "pt"
    else:
        return False, None
    mask = first.get("attention_mask")
    if mask is not None and type(mask) is not list and getattr(mask, "ndim", 0) > 1:
        return False, None
    return True, kind


@dataclass
class DataCollatorWithPadding:
    """Same fields and output as `transformers.DataCollatorWithPadding`: pads with the
    tokenizer's settings, then renames `label` / `label_ids` to `labels`.

    One field transformers does not have: `pin_memory=True` returns the batch in page-locked
    host memory (see `pad`). It needs CUDA and `return_tensors="pt"`, checked here at
    construction, and `num_workers=0` in the DataLoader (a worker's batch reaches the main
    process through shared memory, unpinned): a call in a worker raises."""

    tokenizer: Any
    padding: bool | str = True
    max_length: int | None = None
    pad_to_multiple_of: int | None = None
    return_tensors: str = "pt"
    pin_memory: bool = False

    # The settled options of the last call (see `_CallPlan`); not a field.
    _call_plan: ClassVar[_CallPlan | None] = None

    def __post_init__(self):
        # Bad options raise here, by the rules each call applies (in its order), not at the
        # first batch.
        check_tokenizer(self.tokenizer, "DataCollatorWithPadding")
        return_tensors = check_return_tensors(self.return_tensors)
        check_padding_options(self.padding, self.max_length, self.pad_to_multiple_of)
        check_pin_memory(self.pin_memory, return_tensors)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_call_plan", None)  # rebuilt on the first call wherever it is unpickled
        return state

    @property
    def accepts_arrow_batches(self) -> bool:
        """True unless a subclass replaces `__call__` (it may expect a list of rows) or the
        processing class is not a tokenizer (a feature extractor pads a list of rows)."""
        return (type(self).__call__ is DataCollatorWithPadding.__call__
                and processing_kind(self.tokenizer) is None)

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, Any]:
        plan = self._call_plan
        tokenizer = self.tokenizer
        fields = plan.fields if plan is not None else ()
        if (
            fields
            # The same objects: the options plan was settled from are unchanged.
            and fields[0] is tokenizer
            and fields[1] is self.padding
            and fields[2] is self.max_length
            and fields[3] is self.pad_to_multiple_of
            and fields[4] is self.return_tensors
            and fields[5] is self.pin_memory
            and type(features) is list
            and features
            and type(features[0]) is dict
            and has_state_key(tokenizer, plan.tokenizer_key)
            and (plan.default_dtype is None or plan.get_default_dtype() is plan.default_dtype)
        ):
            first = features[0]
            main_value = first.get(plan.main)
            mask = first.get("attention_mask")
            main_type = type(main_value)
            if (
                # The usual row, settled here: token ids and mask as lists of ints.
                main_type is list
                and main_value
                and type(main_value[0]) is int
                and (mask is None or type(mask) is list)
            ):
                planned, main_kind = True, None
            elif (main_kind := plan.array_kinds.get(main_type)) is not None and (
                # Token ids and mask as numpy arrays or torch tensors (exactly those classes),
                # the mask of at most one dimension, settled here too.
                mask is None or (type(mask) is main_type and mask.ndim <= 1)
            ):
                planned = True
            else:
                planned, main_kind = _row_main_kind(first, plan.main)
            if planned:
                batch = collate_rows(features, plan.native_plans[main_kind])
                if type(batch) is not dict:
                    return batch  # finished natively: no key came back as a list
                if list in map(type, batch.values()):
                    batch = converted_like_tokenizer_pad(batch, main_kind, main_kind is None,
                                                         fields[4])
                # `_renamed_labels`, spelled out: a call is a fortieth of what is left.
                if "label" in batch:
                    batch["labels"] = batch.pop("label")
                if "label_ids" in batch:
                    batch["labels"] = batch.pop("label_ids")
                return batch_encoding(batch)
        if tokenizer is not None and (kind := processing_kind(tokenizer)) is not None:
            return self._call_with_processing_class(features, kind)
        check_tokenizer(tokenizer, "DataCollatorWithPadding")
        batch = pad(
            features,
            tokenizer,
            padding=self.padding,
            max_length=self.max_length,
            pad_to_multiple_of=self.pad_to_multiple_of,
            return_tensors=self.return_tensors,
            pin_memory=self.pin_memory,
        )
        self._plan_next_call()
        return _renamed_labels(batch)

    def _call_with_processing_class(self, features: Any, kind: str) -> Any:
        """A feature extractor's padding (natively; a processor that forwards to one the
        same), or, for another transformers processing class, transformers' own collator."""
        if kind == "feature_extractor":
            batch = pad_features(features, feature_extractor_of(self.tokenizer),
                                 padding=self.padding, max_length=self.max_length,
                                 pad_to_multiple_of=self.pad_to_multiple_of,
                                 return_tensors=self.return_tensors)
            if self.pin_memory:
                pin_tensors(batch)
            return _renamed_labels(batch)
        from .._internal.patching import original

        if self.pin_memory:
            raise ValueError(f"pin_memory=True is not taken with a "
                             f"{type(self.tokenizer).__name__}: transformers' collator pads it")
        transformers_collator = original("transformers.data.data_collator",
                                         "DataCollatorWithPadding")
        return transformers_collator(self.tokenizer, padding=self.padding,
                                     max_length=self.max_length,
                                     pad_to_multiple_of=self.pad_to_multiple_of,
                                     return_tensors=self.return_tensors)(features)

    def _plan_next_call(self) -> None:
        """Settles the options for the calls to come, after a call that succeeded with them:
        only with plain "pt" / "np" output, no pinning, and a tokenizer with a state key."""
        return_tensors = self.return_tensors
        if type(return_tensors) is not str or return_tensors not in ("pt", "np"):
            return
        if self.pin_memory is not False:
            return
        tokenizer = self.tokenizer
        key = state_key(tokenizer)
        if key is None:
            return
        settings = PadSettings.resolve(tokenizer)
        group = padding_group(settings, self.padding, self.max_length, self.pad_to_multiple_of,
                              None)
        # Settled only when the settings are the key's snapshot: a change made meanwhile (by
        # another thread) would pair the old key with the new settings.
        if not settings.agrees_with(keyed_settings(key)):
            return
        fields = (tokenizer, self.padding, self.max_length, self.pad_to_multiple_of,
                  return_tensors, self.pin_memory)
        self._call_plan = _CallPlan(fields, key, settings, group, return_tensors)


def _renamed_labels(batch: Any) -> Any:
    """`label` / `label_ids` renamed to `labels`, as transformers' collator renames them."""
    # Renamed in the underlying dict: a BatchEncoding's Python-level item methods cost about
    # a microsecond a batch, a tenth of a small batch's time.
    data = batch if type(batch) is dict else batch.data  # pad() gives one of the two
    for old in ("label", "label_ids"):
        if old in data:
            data["labels"] = data.pop(old)
    return batch
