"""A tokenizer's padding settings, read once and read again only when the tokenizer changes.

`tokenizer.pad_token_id` goes through transformers' `__getattr__` and `convert_tokens_to_ids`:
about 1.5 µs, a tenth of a small batch. Caching its value alone would be unsound (the pad
token can be replaced, or added to the vocabulary after being set), so the cache is keyed by
everything the value is computed from, read where transformers itself stores it: the pad and
unknown tokens in `_special_tokens_map`, the backend tokenizer object and its vocabulary size
(adding tokens grows it), and the plain attributes `padding_side`, `model_input_names`,
`model_max_length` and `_pad_token_type_id`. A key that differs in any of them resolves the
settings again through transformers' own attributes.

Only tokenizers whose class uses transformers' own lookups for all of these are keyed this way
(`_is_keyable`); any other object, an older transformers that stores them elsewhere, or a
subclass that overrides one of the lookups is read through its attributes on every call.
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

# The lookups whose results the key stands for, which a keyable class must not override.
_LOOKUPS = (
    "__getattr__",
    "convert_tokens_to_ids",
    "_convert_token_to_id_with_added_voc",
    "pad_token_type_id",
    "__len__",
)
# Names that must reach transformers' `__getattr__` (no class attribute may answer them first).
_SPECIAL = ("pad_token", "pad_token_id", "unk_token", "unk_token_id")
# Plain instance attributes: a data descriptor on the class would answer instead of them.
_PLAIN = ("padding_side", "model_input_names", "model_max_length", "_pad_token_type_id")

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


def state_key(tokenizer: Any) -> tuple | None:
    """What a tokenizer's padding settings are computed from, or None where they cannot be
    keyed soundly (then they are read through its attributes)."""
    cls = type(tokenizer)
    keyable = _KEYABLE.get(cls)
    if keyable is None:
        keyable = _KEYABLE[cls] = _is_keyable(cls)
    if not keyable:
        return None
    attributes = tokenizer.__dict__
    if (
        "pad_token_id" in attributes
        or "pad_token" in attributes
        or "unk_token_id" in attributes
        or "unk_token" in attributes
    ):
        return None  # set on the instance itself: transformers' lookup is bypassed
    try:
        special = attributes["_special_tokens_map"]
        backend = attributes["_tokenizer"]
        return (
            special.get("pad_token"),
            special.get("unk_token"),
            backend,
            backend.get_vocab_size(True),
            attributes["_pad_token_type_id"],
            attributes["padding_side"],
            tuple(attributes["model_input_names"]),
            attributes["model_max_length"],
        )
    except (KeyError, AttributeError, TypeError):
        return None


class _Entry:
    __slots__ = ("tokenizer", "key", "value")

    def __init__(self, tokenizer: Any, key: tuple, value: Any):
        self.tokenizer = weakref.ref(tokenizer)
        self.key = key
        self.value = value


_ENTRIES: dict[int, _Entry] = {}
_MAX_ENTRIES = 64


def cached(tokenizer: Any, compute: Any) -> Any:
    """`compute(tokenizer)`, remembered per tokenizer until its state key changes (always
    computed where it has none)."""
    key = state_key(tokenizer)
    if key is None:
        return compute(tokenizer)
    entry = _ENTRIES.get(id(tokenizer))
    if entry is not None and entry.tokenizer() is tokenizer and entry.key == key:
        return entry.value
    value = compute(tokenizer)
    if len(_ENTRIES) >= _MAX_ENTRIES:
        _ENTRIES.clear()
    try:
        _ENTRIES[id(tokenizer)] = _Entry(tokenizer, key, value)
    except TypeError:  # not weak-referenceable: nothing is remembered
        pass
    return value
