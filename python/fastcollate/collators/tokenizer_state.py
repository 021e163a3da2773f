"""A tokenizer's padding settings, read once and read again only when the tokenizer changes.

`tokenizer.pad_token_id` goes through transformers' `__getattr__` and `convert_tokens_to_ids`,
a noticeable part of a small batch's time. Caching its value alone would be unsound (the pad
token can be replaced, or added to the vocabulary after being set), so the cache is keyed by
everything the value is computed from, read where transformers itself reads it: the pad
token's text (`str()` of what `_special_tokens_map` holds: an `AddedToken`'s text can be
changed in place) and the id the backend tokenizer's `token_to_id` gives for it (asked every
time: adding tokens, or replacing the backend's model, changes the backend object in place),
with the unknown token's text and id where the pad token has none; and the plain attributes
`padding_side`, `model_input_names`, `model_max_length` and `_pad_token_type_id`. A key that
differs in any of them resolves the settings again through transformers' own attributes.

Only tokenizers whose class uses transformers' own lookups for all of these are keyed this way
(`_is_keyable`), and only while no instance attribute shadows one of them (`_SHADOWING`); any
other object, an older transformers that stores them elsewhere, or a subclass that overrides
one of the lookups is read through its attributes on every call.
"""

from __future__ import annotations

import sys
import weakref
from typing import Any, NamedTuple

from .. import _native
from .._internal.upstream import (
    TOKENIZER_BACKEND,
    TOKENIZER_CONVERT_TOKEN_TO_ID,
    TOKENIZER_PAD_TOKEN_TYPE_ID,
    TOKENIZER_SPECIAL_TOKENS_MAP,
)

# The lookups whose results the key stands for, which a keyable class must not override.
_LOOKUPS = (
    "__getattr__",
    "convert_tokens_to_ids",
    TOKENIZER_CONVERT_TOKEN_TO_ID,
    "pad_token_type_id",
    "__len__",
)
# Names that must reach transformers' `__getattr__` (no class attribute may answer them first).
_SPECIAL = ("pad_token", "pad_token_id", "unk_token", "unk_token_id")
# Plain instance attributes: a data descriptor on the class would answer instead of them.
_PLAIN = ("padding_side", "model_input_names", "model_max_length", TOKENIZER_PAD_TOKEN_TYPE_ID)

_KEYABLE: dict[type, bool] = {}


def _transformers_classes() -> tuple[type, type] | None:
    """transformers' tokenizer base class and its tokenizers-backed subclass, if imported."""
    base = sys.modules.get("transformers.tokenization_utils_base")
    backend = sys.modules.get("transformers.tokenization_utils_tokenizers")
    if base is None or backend is None:
        return None
    base_class = getattr(base, "PreTrainedTokenizerBase", None)
    backend_class = getattr(backend, "TokenizersBackend", None)
    if base_class is None or backend_class is None:
        return None
    return base_class, backend_class


def _defined_by(cls: type, name: str) -> type | None:
    """The class of `cls`'s MRO whose namespace holds `name` first, or None."""
    for klass in cls.__mro__:
        if name in vars(klass):
            return klass
    return None


def _is_keyable(cls: type) -> bool:
    classes = _transformers_classes()
    if classes is None or not issubclass(cls, classes[1]):
        return False
    base, backend = classes
    for name in _LOOKUPS:
        if _defined_by(cls, name) not in (base, backend):
            return False
    if any(_defined_by(cls, name) is not None for name in _SPECIAL):
        return False
    for name in _PLAIN:
        owner = _defined_by(cls, name)
        if owner is not None and hasattr(type(vars(owner)[name]), "__set__"):
            return False
    return "pad_token" in getattr(cls, "SPECIAL_TOKENS_ATTRIBUTES", ())


# Names that, set on an instance, would answer instead of transformers' lookups.
_SHADOWING = (
    "pad_token_id",
    "pad_token",
    "unk_token_id",
    "unk_token",
    "SPECIAL_TOKENS_ATTRIBUTES",
    "convert_tokens_to_ids",
    TOKENIZER_CONVERT_TOKEN_TO_ID,
)


class PadIdInputs(NamedTuple):
    """What transformers computes `pad_token_id` from: the pad token's text and the backend's
    id for it, and where that is None (not in the vocabulary: the unknown token's id is used)
    the unknown token's text and id too."""

    pad_text: str | None
    pad_id: int | None
    unk_text: str | None
    unk_id: int | None


_NO_PAD_TOKEN = PadIdInputs(None, None, None, None)


class StateKey(NamedTuple):
    """What a tokenizer's padding settings are computed from (see the module's docstring)."""

    cls: type
    pad_id_inputs: PadIdInputs
    pad_token_type_id: Any
    padding_side: Any
    # A copy: the tokenizer's list may be changed in place.
    model_input_names: list[Any]
    model_max_length: Any


def _pad_id_inputs(special: Any, backend: Any) -> PadIdInputs:
    """The `PadIdInputs` of a tokenizer whose special tokens map and backend these are."""
    return PadIdInputs(*_native.pad_id_inputs(special, backend))


def state_key(tokenizer: Any) -> StateKey | None:
    """What a tokenizer's padding settings are computed from, or None where they cannot be
    keyed soundly (then they are read through its attributes)."""
    cls = type(tokenizer)
    keyable = _KEYABLE.get(cls)
    if keyable is None:
        keyable = _KEYABLE[cls] = _is_keyable(cls)
    if not keyable:
        return None
    attributes = tokenizer.__dict__
    if not attributes.keys().isdisjoint(_SHADOWING):
        return None  # set on the instance itself: transformers' lookup is bypassed
    try:
        return StateKey(
            cls,
            _pad_id_inputs(attributes[TOKENIZER_SPECIAL_TOKENS_MAP], attributes[TOKENIZER_BACKEND]),
            attributes[TOKENIZER_PAD_TOKEN_TYPE_ID],
            attributes["padding_side"],
            list(attributes["model_input_names"]),
            attributes["model_max_length"],
        )
    except (KeyError, AttributeError, TypeError):
        return None


# The attribute names `has_state_key` reads besides the plain ones, for the native comparison.
STATE_NAMES = (TOKENIZER_SPECIAL_TOKENS_MAP, TOKENIZER_BACKEND, TOKENIZER_PAD_TOKEN_TYPE_ID,
               _SHADOWING)


def has_state_key(tokenizer: Any, key: StateKey) -> bool:
    """Whether `state_key(tokenizer) == key`, for a `key` that `state_key` gave, without
    building a new key (which costs a planned collator call more than the comparison): the
    same reads and `==` comparisons, made natively (`_native.has_state_key`)."""
    return _native.has_state_key(tokenizer, key, STATE_NAMES)


class _Entry:
    __slots__ = ("tokenizer", "key", "value")

    def __init__(self, tokenizer: Any, key: StateKey, value: Any):
        self.tokenizer = weakref.ref(tokenizer)
        self.key = key
        self.value = value


_ENTRIES: dict[int, _Entry] = {}
_MAX_ENTRIES = 64


class KeyedSettings(NamedTuple):
    """A tokenizer's padding settings as transformers' attributes give them."""

    pad_token_id: int | None
    pad_token_type_id: Any
    padding_side: Any
    model_input_names: list[Any]
    model_max_length: Any


def keyed_settings(key: StateKey) -> KeyedSettings:
    """The settings a tokenizer in the state `key` describes has. The pad token's id is the
    backend's id for its text, else the unknown token's id (None without a pad token, or
    without an unknown token)."""
    inputs = key.pad_id_inputs
    return KeyedSettings(
        inputs.pad_id if inputs.pad_id is not None else inputs.unk_id,
        key.pad_token_type_id,
        key.padding_side,
        key.model_input_names,
        key.model_max_length,
    )


def cached(tokenizer: Any, compute: Any, agrees: Any) -> Any:
    """`compute(tokenizer)`, remembered per tokenizer until its state key changes (always
    computed where it has none). `agrees(value, keyed_settings(key))` tells whether a value
    was computed from the state the key was read from: one that was not (the tokenizer
    changed in between) is returned but not remembered."""
    entry = _ENTRIES.get(id(tokenizer))
    if entry is not None and entry.tokenizer() is tokenizer and has_state_key(tokenizer, entry.key):
        return entry.value
    key = state_key(tokenizer)
    if key is None:
        return compute(tokenizer)
    value = compute(tokenizer)
    # Another thread may have changed the tokenizer between the key and the value (even
    # changed it and back): the pair is remembered only when the value is what the key's
    # snapshot gives, so a stale pair is never served.
    if not agrees(value, keyed_settings(key)):
        return value
    if len(_ENTRIES) >= _MAX_ENTRIES:
        _ENTRIES.clear()
    try:
        _ENTRIES[id(tokenizer)] = _Entry(tokenizer, key, value)
    except TypeError:  # not weak-referenceable: nothing is remembered
        pass
    return value
