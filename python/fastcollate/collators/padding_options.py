"""Padding options, resolved as transformers resolves them: the tokenizer's settings
(`PadSettings`), the padding strategy and length, checked integer options, and the pad group
handed to the native module (remembered per set of plain options)."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Sequence
from typing import Any, NamedTuple, cast

import numpy as np

from .. import _native
from .tokenizer_state import KeyedSettings, cached

# transformers' PreTrainedTokenizerBase defaults, used when no tokenizer is given.
DEFAULT_MODEL_INPUT_NAMES = ("input_ids", "token_type_ids", "attention_mask")
# transformers treats a model_max_length above this as "no limit" (tokenization_utils_base).
LARGE_INTEGER = int(1e20)
PADDING_STRATEGIES = ("longest", "max_length", "do_not_pad")


class PadSettings(NamedTuple):
    """What padding needs to know about the tokenizer (or the keyword arguments standing in).
    Immutable; a NamedTuple because it is made on every call, and a NamedTuple is cheaper to
    make than a frozen dataclass."""

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
        if (
            tokenizer is not None
            and pad_token_id is None
            and padding_side is None
            and model_input_names is None
        ):
            # The tokenizer's own settings: read again only when it changes.
            return cast(PadSettings, cached(tokenizer, cls._of_tokenizer, PadSettings.agrees_with))
        return cls._resolve(tokenizer, pad_token_id, pad_token_type_id, padding_side,
                            model_input_names)

    def agrees_with(self, settings: KeyedSettings) -> bool:
        """Whether these are the settings `tokenizer_state.keyed_settings` gives."""
        return KeyedSettings(
            self.pad_token_id,
            self.pad_token_type_id,
            self.padding_side,
            list(self.model_input_names),
            self.model_max_length,
        ) == settings

    @classmethod
    def _of_tokenizer(cls, tokenizer: Any) -> PadSettings:
        return cls._resolve(tokenizer, None, 0, None, None)

    @classmethod
    def _resolve(
        cls,
        tokenizer: Any,
        pad_token_id: int | None,
        pad_token_type_id: int,
        padding_side: str | None,
        model_input_names: Sequence[str] | None,
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


IGNORED_MAX_LENGTH = (
    "`max_length` is ignored when `padding`=`True` and there is no truncation strategy. "
    "To pad to max length, use `padding='max_length'`."
)


def max_length_warning(padding: Any, max_length: Any) -> str | None:
    """The UserWarning's message `tokenizer.pad` gives (unless `verbose=False`) when it pads to
    the longest row though a `max_length` was given: `padding=True` (the value itself, not
    "longest") beside a `max_length`; None where it gives none."""
    return IGNORED_MAX_LENGTH if padding is True and max_length is not None else None


def warn_if_max_length_ignored(padding: Any, max_length: Any) -> None:
    """Gives `max_length_warning`'s warning, if any, attributed to the caller's caller."""
    message = max_length_warning(padding, max_length)
    if message is not None:
        warnings.warn(message, UserWarning, stacklevel=3)


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
    return cast(str, value)


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
    return cast(int, value)


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
            # transformers warns and pads nothing (then fails on ragged rows under "pt" and
            # "np"); an option that cannot be honoured is refused here, whatever the output.
            whose = ("there is no tokenizer" if settings.without_tokenizer
                     else "the tokenizer has no model_max_length")
            raise ValueError(
                f"padding='max_length' needs a max_length: none was given and {whose} "
                "(pass max_length=, or padding='longest')"
            )
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
    return strategy, checked_max_length(max_length, strategy)


def checked_max_length(max_length: Any, strategy: str) -> int | None:
    """`max_length` as padding uses it under `strategy`: None unless "max_length" (transformers
    ignores it then, whatever it is), else a non-negative integer no larger than an array."""
    if max_length is None or strategy != "max_length":
        return None
    if pad_to_multiple_of_invalid(max_length):
        raise ValueError(f"max_length must be a non-negative integer, not {max_length!r}")
    if max_length > MAX_SIZE:
        raise ValueError(
            f"max_length={max_length} is larger than any array can be; check max_length"
        )
    return cast(int, max_length)


def check_pad_to_multiple_of(value: Any) -> None:
    """None or a positive integer."""
    if pad_to_multiple_of_invalid(value) or value == 0:
        raise ValueError(f"pad_to_multiple_of must be a positive integer, not {value!r}")


def check_padding_options(padding: Any, max_length: Any, pad_to_multiple_of: Any) -> None:
    """A collator's padding options, checked when it is made by the rules each call applies
    (`padding_strategy`, `checked_max_length`, `check_pad_to_multiple_of`): a bad option
    raises there, not at the first batch."""
    checked_max_length(max_length, padding_strategy(padding))
    check_pad_to_multiple_of(pad_to_multiple_of)


def clamped_multiple(value: Any) -> Any:
    """A pad_to_multiple_of past the largest size as the smallest such multiple: any of them
    rounds a length of 0 to 0 and every other past the largest size (which the Rust core
    reports, naming the key), so they all behave alike. Other values pass unchanged."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value > MAX_SIZE:
        return MAX_SIZE + 1
    return value


def pad_to_multiple_of_invalid(value: Any) -> bool:
    return value is not None and bool(
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
) -> _native.PadGroup:
    """The pad group `tokenizer._pad` applies: the main input, token_type_ids,
    special_tokens_mask and (when asked for) the attention mask."""
    check_pad_to_multiple_of(pad_to_multiple_of)
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
    return _native.PadGroup(
        settings.main_input,
        pad_value=checked_pad_id("pad_token_id", settings.pad_token_id or 0),
        strategy=strategy,
        max_length=max_length,
        pad_to_multiple_of=pad_to_multiple_of,
        left=settings.padding_side == "left",
        followers=[f for f in followers if f[0] != settings.main_input],
        attention_mask="attention_mask" if return_attention_mask else None,
        # Token ids: a float among them is an error naming its row (transformers raises for a
        # float first value, and otherwise returns float ids no embedding takes).
        integer_lead=True,
    )


_PLAIN_OPTION_TYPES = frozenset((bool, int, str, type(None)))
_GROUPS: dict[tuple[Any, ...], _native.PadGroup] = {}
_GROUPS_OF_SETTINGS: dict[tuple[Any, ...], tuple[PadSettings, _native.PadGroup]] = {}
_MAX_GROUPS = 256


def padding_group(
    settings: PadSettings,
    padding: Any,
    max_length: int | None,
    pad_to_multiple_of: int | None,
    return_attention_mask: bool | None,
) -> _native.PadGroup:
    """`resolve_padding` then `main_group`: the pad group for these settings and options,
    remembered. A collator pads every batch with the same ones, and working the group out
    again on every batch is not free. Only options of plain types are
    remembered, with their types in the key (True == 1, but `padding=1` is an error)."""
    # Settings read from a tokenizer are one object until it changes: keyed by identity first.
    fast_key = (id(settings), padding, type(padding), max_length, type(max_length),
                pad_to_multiple_of, type(pad_to_multiple_of), return_attention_mask,
                type(return_attention_mask))
    try:
        known = _GROUPS_OF_SETTINGS.get(fast_key)
    except TypeError:  # an unhashable option: worked out (and reported) the long way
        return _padding_group(settings, padding, max_length, pad_to_multiple_of,
                              return_attention_mask)
    if known is not None and known[0] is settings:
        return known[1]
    group = _padding_group(settings, padding, max_length, pad_to_multiple_of,
                           return_attention_mask)
    if len(_GROUPS_OF_SETTINGS) >= _MAX_GROUPS:
        _GROUPS_OF_SETTINGS.clear()
    _GROUPS_OF_SETTINGS[fast_key] = (settings, group)
    return group


def _padding_group(
    settings: PadSettings,
    padding: Any,
    max_length: int | None,
    pad_to_multiple_of: int | None,
    return_attention_mask: bool | None,
) -> _native.PadGroup:
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


def check_tokenizer(tokenizer: Any, collator: str) -> None:
    """A collator pads with its tokenizer's settings (pad token, padding side, input names):
    None is refused, and so is anything that is not a tokenizer (or a feature extractor or
    processor) instance: a model name, a number, a class (transformers' collators fail on them
    at the first batch, with an AttributeError)."""
    if tokenizer is None:
        raise ValueError(
            f"{collator} needs a tokenizer: it pads with the tokenizer's pad token, padding "
            f"side and input names; make it with {collator}(tokenizer) (to pad without a "
            "tokenizer, call fastcollate.pad(rows, pad_token_id=...) instead)"
        )
    check_processing_object(tokenizer, f"{collator}'s tokenizer")


def check_processing_object(value: Any, what: str) -> None:
    """A TypeError unless `value` is a tokenizer, feature extractor or processor instance
    (anything with `model_input_names`, as every transformers processing class has): `what`
    names the argument. A string is most likely a model name, and the message says how to load
    it."""
    if not isinstance(value, type) and hasattr(value, "model_input_names"):
        return
    if isinstance(value, str):
        hint = (f"; {value!r} looks like a model name: load its tokenizer with "
                f"transformers.AutoTokenizer.from_pretrained({value!r}) and pass that")
    elif isinstance(value, type):
        hint = f"; {value.__name__} is a class: pass an instance of it (from_pretrained)"
    else:
        hint = ""
    raise TypeError(
        f"{what} must be a tokenizer (or a feature extractor or processor) instance, not a "
        f"{type(value).__name__}{hint}"
    )
