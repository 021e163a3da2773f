"""`PreTrainedTokenizerBase.pad` under `patch_transformers(tokenizer_pad=True)`: the batches
fastcollate pads exactly as transformers does go through `fastcollate.pad`; everything else
(and anything fastcollate refuses) is handed to transformers' own method, so a call never
gives a different result.

The route takes a list (or tuple) of rows, or a mapping of batched lists, when:
- the tokenizer's class keeps transformers' `_pad` and `_get_padding_truncation_strategies`
  (LayoutLM, LUKE, TAPAS and others pad extra keys their own way);
- the options are plain ones: `padding` True / False / a strategy name, integer lengths,
  `padding_side` None / "left" / "right", `return_attention_mask` None / True / False;
- the output is numpy or torch (`return_tensors` "np" / "pt", or numpy / torch token ids);
  `return_tensors=None` hands back Python lists of the caller's own objects, which transformers
  returns as they were given;
- the token ids (and the attention mask, token type ids and special-tokens mask beside them)
  are in every row Python lists starting with an int, or all numpy arrays, or all torch
  tensors, and the other keys hold Python numbers or lists beside list token ids;
- the batch holds at least one token.
transformers resolves the padding strategy (its warnings and its "no padding token" error
included) before fastcollate pads."""

from __future__ import annotations

from typing import Any

import numpy as np
from transformers.tokenization_utils_base import BatchEncoding

from .._internal.patching import original
from .._internal.tensors import is_torch_tensor
from .._internal.upstream import TOKENIZER_PAD_METHODS, TOKENIZER_RESOLVE_PADDING
from ..collators import pad as fastcollate_pad

MODULE = "transformers.tokenization_utils_base"
NAME = "PreTrainedTokenizerBase.pad"

_STRATEGIES = ("longest", "max_length", "do_not_pad")
_SIDES = (None, "left", "right")
_PADDED_BESIDE_MAIN = ("attention_mask", "token_type_ids", "special_tokens_mask")
_PLAIN_VALUES = (int, float, bool, list)

# Tokenizer classes checked to pad as the base class does, by class.
_plain_classes: dict[type, bool] = {}


def _pads_as_base(tokenizer: Any) -> bool:
    cls = type(tokenizer)
    known = _plain_classes.get(cls)
    if known is None:
        base = original(MODULE, "PreTrainedTokenizerBase")
        known = all(
            getattr(cls, name, None) is getattr(base, name)
            for name in TOKENIZER_PAD_METHODS
        )
        _plain_classes[cls] = known
    return known


def _framework(return_tensors: Any) -> str | None:
    """"np" / "pt" / None for those values (TensorType members included); "other" else."""
    value = return_tensors if type(return_tensors) is str or return_tensors is None else getattr(
        return_tensors, "value", return_tensors
    )
    return value if value in (None, "np", "pt") else "other"


def _rows_kind(rows: Any, main: str) -> str | None:
    """The main input's kind ("list", "np", "pt") when every row is a dict whose padded keys
    hold that kind (list token ids starting with an int, arrays / tensors of one dimension),
    and, beside list token ids, whose other keys hold plain Python values; None else."""
    first = rows[0]
    if type(first) is not dict and type(first) is not BatchEncoding:
        return None
    if main not in first:
        return None
    main_value = first[main]
    main_type = type(main_value)
    if main_type is list:
        kind = "list"
    elif main_type is np.ndarray:
        kind = "np"
    elif is_torch_tensor(main_value):
        kind = "pt"
    else:
        return None
    keys = list(first.keys())
    padded = [key for key in keys if key == main or key in _PADDED_BESIDE_MAIN]
    others = [key for key in keys if key not in padded]
    if kind != "list" and any(getattr(first[key], "ndim", 0) != 1 for key in padded):
        return None
    first_token = None
    row_type = type(first)
    for row in rows:
        if type(row) is not row_type:
            return None
        for key in padded:
            if type(row.get(key)) is not main_type:
                return None
        if kind == "list":
            if first_token is None and row[main]:
                first_token = row[main][0]
            for key in others:
                if type(row.get(key)) not in _PLAIN_VALUES:
                    return None
    if kind == "list" and type(first_token) is not int:
        return None  # transformers refuses floats, reads bools and arrays its own way
    return kind


def _mapping_kind(batch: Any, main: str) -> str | None:
    """A mapping of batched Python lists: rows of token ids that are lists of ints."""
    main_values = batch.get(main)
    if type(main_values) is not list or not main_values:
        return None
    first_token = None
    for key, values in batch.items():
        if type(values) is not list or len(values) != len(main_values):
            return None
        padded = key == main or key in _PADDED_BESIDE_MAIN
        for value in values:
            if padded and type(value) is not list:
                return None
            if not padded and type(value) not in _PLAIN_VALUES:
                return None
    for row in main_values:
        if row:
            first_token = row[0]
            break
    return "list" if type(first_token) is int else None


def tokenizer_pad(
    self: Any,
    encoded_inputs: Any,
    padding: Any = True,
    max_length: int | None = None,
    pad_to_multiple_of: int | None = None,
    padding_side: str | None = None,
    return_attention_mask: bool | None = None,
    return_tensors: Any = None,
    verbose: bool = True,
) -> Any:
    """transformers' `tokenizer.pad`, through `fastcollate.pad` where the result is the same
    (see the module's docstring); transformers' own method for everything else."""
    options = (padding, max_length, pad_to_multiple_of, padding_side, return_attention_mask)
    kind = _route_kind(self, encoded_inputs, options, return_tensors)
    if kind is None:
        return original(MODULE, NAME)(
            self, encoded_inputs, padding, max_length, pad_to_multiple_of, padding_side,
            return_attention_mask, return_tensors, verbose,
        )
    try:
        resolve_padding = getattr(self, TOKENIZER_RESOLVE_PADDING)
        strategy, _, resolved_length, _ = resolve_padding(
            padding=padding, max_length=max_length, verbose=verbose
        )
    except Exception:  # noqa: BLE001 - transformers raises it in its own order
        return _transformers_pad(self, encoded_inputs, options, return_tensors)
    strategy = strategy.value
    if strategy == "longest":
        resolved_length = None
    try:
        batch = fastcollate_pad(
            encoded_inputs,
            self,
            padding=strategy,
            max_length=resolved_length,
            pad_to_multiple_of=pad_to_multiple_of,
            padding_side=padding_side,
            return_attention_mask=return_attention_mask,
            return_tensors=return_tensors,
        )
    except Exception:  # noqa: BLE001 - fastcollate refuses what transformers may take
        return _transformers_pad(self, encoded_inputs, options, return_tensors)
    main = batch[self.model_input_names[0]]
    if main.ndim != 2 or main.shape[1] == 0:
        # transformers builds a batch without tokens from empty lists (float32 under torch).
        return _transformers_pad(self, encoded_inputs, options, return_tensors)
    return batch


def _transformers_pad(self: Any, encoded_inputs: Any, options: tuple[Any, ...],
                      return_tensors: Any) -> Any:
    """transformers' own pad, with its length warning off (the strategy was already resolved,
    warning included, once)."""
    return original(MODULE, NAME)(self, encoded_inputs, *options, return_tensors, False)


def _route_kind(tokenizer: Any, encoded_inputs: Any, options: tuple[Any, ...],
                return_tensors: Any) -> Any:
    padding, max_length, pad_to_multiple_of, padding_side, return_attention_mask = options
    if not (
        (padding is True or padding is False
         or (isinstance(padding, str) and padding in _STRATEGIES))
        and (max_length is None or type(max_length) is int)
        and (pad_to_multiple_of is None or type(pad_to_multiple_of) is int)
        and padding_side in _SIDES
        and (padding_side is None or type(padding_side) is str)
        and return_attention_mask in (None, True, False)
        and type(return_attention_mask) in (type(None), bool)
    ):
        return None
    framework = _framework(return_tensors)
    if framework == "other" or not _pads_as_base(tokenizer):
        return None
    main = tokenizer.model_input_names[0]
    if type(encoded_inputs) in (list, tuple):
        if not encoded_inputs:
            return None
        kind = _rows_kind(encoded_inputs, main)
    elif type(encoded_inputs) is dict or type(encoded_inputs) is BatchEncoding:
        kind = _mapping_kind(encoded_inputs, main)
    else:
        return None
    if kind is None or (framework is None and kind == "list"):
        return None
    return kind
