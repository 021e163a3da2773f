"""`pad()`: the drop-in for `tokenizer.pad()`, on the Rust core."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from ._arrow import ArrowBatch
from ._native_collate import collate
from ._rows import first_row, missing_main_input
from ._stacked_masks import put_back, set_aside_masks
from ._tensors import batch_encoding, check_return_tensors, convert, is_torch_tensor

# transformers' PreTrainedTokenizerBase defaults, used when no tokenizer is given.
DEFAULT_MODEL_INPUT_NAMES = ("input_ids", "token_type_ids", "attention_mask")
# transformers treats a model_max_length above this as "no limit" (tokenization_utils_base).
LARGE_INTEGER = int(1e20)
PADDING_STRATEGIES = ("longest", "max_length", "do_not_pad")


class PadSettings(NamedTuple):
    """What padding needs to know about the tokenizer (or the keyword arguments standing in).
    Immutable; a NamedTuple because it is made on every call, in a third of a frozen
    dataclass's time."""

    pad_token_id: int | None
    pad_token_type_id: int
    padding_side: str
    model_input_names: tuple[str, ...]
    model_max_length: int
    without_tokenizer: bool = False

    @classmethod
    def resolve(
        cls,
        tokenizer: Any = None,
        *,
        pad_token_id: int | None = None,
        pad_token_type_id: int = 0,
        padding_side: str | None = None,
        model_input_names: Sequence[str] | None = None,
    ) -> PadSettings:
        if tokenizer is not None:
            if pad_token_id is None:
                # transformers refuses to pad when the pad token is unset or its id is negative.
                # An unset pad token has no id (None) either, so the id alone tells both, in
                # one lookup: `pad_token` went through the tokenizer's `__getattr__` too.
                pad_token_id = getattr(tokenizer, "pad_token_id", None)
            pad_token_type_id = tokenizer.pad_token_type_id
            padding_side = padding_side if padding_side is not None else tokenizer.padding_side
            if model_input_names is None:
                model_input_names = tokenizer.model_input_names
            model_max_length = tokenizer.model_max_length
        else:
            model_max_length = LARGE_INTEGER + 1
        if padding_side is None:
            padding_side = "right"
        if padding_side not in ("left", "right"):
            raise ValueError(f"padding_side must be 'left' or 'right', not {padding_side!r}")
        names = tuple(model_input_names or DEFAULT_MODEL_INPUT_NAMES)
        if not names:
            raise ValueError("model_input_names must name at least the main input")
        return cls(
            pad_token_id,
            pad_token_type_id,
            padding_side,
            names,
            model_max_length,
            without_tokenizer=tokenizer is None,
        )

    @property
    def main_input(self) -> str:
        return self.model_input_names[0]


def padding_strategy(padding: Any) -> str:
    """True/False/str/transformers.PaddingStrategy -> "longest" / "max_length" / "do_not_pad"."""
    if padding is True:
        return "longest"
    if padding is False or padding is None:
        return "do_not_pad"
    value = getattr(padding, "value", padding)
    if value not in PADDING_STRATEGIES:
        raise ValueError(
            f"{padding!r} is not a valid padding strategy; use True/'longest', 'max_length' or "
            "False/'do_not_pad'"
        )
    return value


_INT64 = (-(2**63), 2**63 - 1)
# The largest length an output can have (numpy and the Rust core index with a signed size).
MAX_SIZE = sys.maxsize


def checked_int(name: str, value: Any, low: int, high: int) -> int:
    """`value` as an int in [low, high]: a TypeError for a non-integer (bools included), a
    ValueError naming the option when out of range (instead of an OverflowError from deep
    inside)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, not {type(value).__name__}")
    value = int(value)
    if not low <= value <= high:
        raise ValueError(f"{name}={value} is out of range: it must be in [{low}, {high}]")
    return value


def checked_pad_id(name: str, value: Any) -> int:
    """A pad value for an int64 output."""
    return checked_int(name, value, *_INT64)


def resolve_padding(
    settings: PadSettings, padding: Any, max_length: int | None
) -> tuple[str, int | None]:
    """The strategy and length transformers' `_get_padding_truncation_strategies` settles on,
    with its pad-token check."""
    strategy = padding_strategy(padding)
    if strategy == "max_length" and max_length is None:
        if settings.model_max_length > LARGE_INTEGER:
            strategy = "do_not_pad"
        else:
            max_length = settings.model_max_length
    if strategy != "do_not_pad" and (settings.pad_token_id is None or settings.pad_token_id < 0):
        if settings.without_tokenizer:
            raise ValueError(
                "pass pad_token_id= to fastcollate.pad: without a tokenizer there is no pad "
                "token to pad with"
            )
        raise ValueError(
            "Asking to pad but the tokenizer does not have a padding token. Please select a "
            "token to use as `pad_token` `(tokenizer.pad_token = tokenizer.eos_token e.g.)` or "
            "add a new pad token via `tokenizer.add_special_tokens({'pad_token': '[PAD]'})` "
            "(or pass pad_token_id= to fastcollate.pad)."
        )
    if max_length is not None:
        if pad_to_multiple_of_invalid(max_length):
            raise ValueError(f"max_length must be a non-negative integer, not {max_length!r}")
        if strategy != "max_length":
            max_length = None  # transformers ignores it then
        elif max_length > MAX_SIZE:
            raise ValueError(
                f"max_length={max_length} is larger than any array can be; check max_length"
            )
    return strategy, max_length


def clamped_multiple(value: Any) -> Any:
    """A pad_to_multiple_of past the largest size as the smallest such multiple: any of them
    rounds a length of 0 to 0 and every other past the largest size (which the Rust core
    reports, naming the key), so they all behave alike. Other values pass unchanged."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value > MAX_SIZE:
        return MAX_SIZE + 1
    return value


def pad_to_multiple_of_invalid(value: Any) -> bool:
    return value is not None and (
        isinstance(value, (bool, np.bool_))
        or not isinstance(value, (int, np.integer))
        or value < 0
    )


def main_group(
    settings: PadSettings,
    strategy: str,
    max_length: int | None,
    pad_to_multiple_of: int | None,
    return_attention_mask: bool | None,
) -> tuple:
    """The pad group `tokenizer._pad` applies: the main input, token_type_ids,
    special_tokens_mask and (when asked for) the attention mask."""
    if pad_to_multiple_of_invalid(pad_to_multiple_of) or pad_to_multiple_of == 0:
        raise ValueError(
            f"pad_to_multiple_of must be a positive integer, not {pad_to_multiple_of!r}"
        )
    if strategy == "do_not_pad":
        pad_to_multiple_of = None  # transformers ignores it then
    else:
        pad_to_multiple_of = clamped_multiple(pad_to_multiple_of)
    if return_attention_mask is None:
        return_attention_mask = "attention_mask" in settings.model_input_names
    followers = (
        ("token_type_ids", checked_pad_id("pad_token_type_id", settings.pad_token_type_id), True),
        ("special_tokens_mask", 1, True),
    )
    return (
        settings.main_input,
        checked_pad_id("pad_token_id", settings.pad_token_id or 0),
        strategy,
        max_length,
        pad_to_multiple_of,
        settings.padding_side == "left",
        tuple(f for f in followers if f[0] != settings.main_input),
        "attention_mask" if return_attention_mask else None,
    )


_PLAIN_OPTION_TYPES = frozenset((bool, int, str, type(None)))
_GROUPS: dict[tuple, tuple] = {}
_MAX_GROUPS = 256


def padding_group(
    settings: PadSettings,
    padding: Any,
    max_length: int | None,
    pad_to_multiple_of: int | None,
    return_attention_mask: bool | None,
) -> tuple:
    """`resolve_padding` then `main_group`: the pad group for these settings and options,
    remembered. A collator pads every batch with the same ones, and working the group out
    again cost about a tenth of a small batch's time. Only options of plain types are
    remembered, with their types in the key (True == 1, but `padding=1` is an error)."""
    # Every field but model_input_names (a tuple of names), with its type.
    values = (padding, max_length, pad_to_multiple_of, return_attention_mask, *settings[:3],
              *settings[4:])
    types = tuple(map(type, values))
    if not _PLAIN_OPTION_TYPES.issuperset(types):
        strategy, max_length = resolve_padding(settings, padding, max_length)
        return main_group(settings, strategy, max_length, pad_to_multiple_of, return_attention_mask)
    memo_key = (settings.model_input_names, values, types)
    group = _GROUPS.get(memo_key)
    if group is None:
        strategy, length = resolve_padding(settings, padding, max_length)
        group = main_group(settings, strategy, length, pad_to_multiple_of, return_attention_mask)
        if len(_GROUPS) >= _MAX_GROUPS:
            _GROUPS.clear()
        _GROUPS[memo_key] = group
    return group


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


def _main_tensor_kind(main_values: Any) -> str | None:
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


class _MainValues:
    """The main input of each row, read on demand (`_main_tensor_kind` usually needs
    only row 0)."""

    def __init__(self, rows: Sequence[Any], main: str):
        self.rows, self.main = rows, main

    def __getitem__(self, index: int) -> Any:
        return self.rows[index][self.main]

    def __iter__(self):
        for row in self.rows:
            yield row[self.main] if isinstance(row, Mapping) else []


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
):
    """Pads a batch (list of mappings, or mapping of lists) or one example, like
    `tokenizer.pad(...)`, with the same result. See the README for what differs.

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

    `verbose` is accepted as `tokenizer.pad` accepts it; fastcollate prints no warnings.
    """
    del verbose
    settings = PadSettings.resolve(
        tokenizer,
        pad_token_id=pad_token_id,
        pad_token_type_id=pad_token_type_id,
        padding_side=padding_side,
        model_input_names=model_input_names,
    )
    return_tensors = check_return_tensors(return_tensors)
    group = padding_group(settings, padding, max_length, pad_to_multiple_of, return_attention_mask)
    main = settings.main_input

    single = False
    # A list of rows first, as tokenizer.pad tests it: the usual batch.
    if isinstance(encoded_inputs, (list, tuple)):
        features: Any = encoded_inputs
        first_main = first_row(encoded_inputs, main, "pad")[main]
        # The usual cases, decided at once: token ids as Python lists, or an array / tensor
        # (whose kind the first row decides, as in `_main_tensor_kind`).
        if type(first_main) is list and first_main and type(first_main[0]) is int:
            main_kind = None
        elif isinstance(first_main, np.ndarray):
            main_kind = "np"
        elif is_torch_tensor(first_main):
            main_kind = "pt"
        else:
            main_kind = _main_tensor_kind(_MainValues(encoded_inputs, main))
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
        main_kind = _main_tensor_kind([main_value] if single else main_value)
    else:
        raise TypeError(
            "pad() takes a list of mappings, a mapping of lists or one example, not "
            f"{type(encoded_inputs).__name__}"
        )
    if return_tensors is None:
        return_tensors = main_kind

    # Masks of two or more dimensions per row are stacked as they are, not padded.
    aside = None if single or isinstance(features, ArrowBatch) else set_aside_masks(features)
    if aside is not None:
        features = aside.features
    # With a Python main input, tokenizer.pad leaves other keys' numpy / torch values as they
    # are, for BatchEncoding to stack with their dtypes: the native module hands such keys
    # back as lists of the original values.
    keep_arrays = main_kind is None and isinstance(features, (list, tuple))
    batch = collate(
        features,
        [group],
        float32=return_tensors == "pt",
        allow_ragged=return_tensors is None,
        keep_arrays=keep_arrays,
        keys=None if aside is None else aside.keys,
    )
    if main_kind is not None:
        _values_to_python(batch)
    kept = ()
    if keep_arrays:
        kept = [
            key for key, values in batch.items() if type(values) is list and _holds_arrays(values)
        ]
    out = convert(batch, return_tensors, stacked_as_batch_encoding=kept)
    if aside is not None:
        put_back(out, aside, return_tensors)
    if single:
        out = {key: _unbatch(value) for key, value in out.items()}
    return batch_encoding(out)


def _values_to_python(batch: dict) -> None:
    """Keys the native module left as Python objects, their arrays turned into Python lists:
    with a numpy / torch main input, tokenizer.pad converts every value that way first (so a
    2-d float64 tensor becomes float32 under "pt", as lists of floats do)."""
    for key, values in batch.items():
        if not isinstance(values, list):
            continue
        try:
            batch[key] = [v.tolist() if isinstance(v, np.ndarray) or is_torch_tensor(v) else v
                          for v in values]
        except Exception as err:  # noqa: BLE001 - meta / sparse tensors, ...
            raise TypeError(f"'{key}' holds values that cannot be read: {err}") from err


def _is_array(value: Any) -> bool:
    return isinstance(value, (np.ndarray, np.generic)) or is_torch_tensor(value)


def _holds_arrays(values: list) -> bool:
    """Whether a key's values (handed back as objects) hold numpy / torch values."""
    return any(
        isinstance(value, (np.ndarray, np.generic)) or is_torch_tensor(value) for value in values
    )


def _unbatch(value: Any) -> Any:
    if isinstance(value, list):
        return value[0]
    return value.reshape(value.shape[1:])
