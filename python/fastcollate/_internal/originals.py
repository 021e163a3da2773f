"""transformers' own objects, whether or not `patch_transformers()` has replaced them.

The registry of replaced objects lives here, below everything that needs an original (the
language-modeling collator's `mask_rng="torch"`, the Trainer's samplers), so none of them has
to import the patching module above it."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

# (module object, attribute, the object transformers had there before patching).
_replaced: list[tuple[ModuleType, str, Any]] = []


def original(module_name: str, name: str) -> Any:
    """transformers' own object, whether or not it is patched right now."""
    for module, attribute, value in _replaced:
        if module.__name__ == module_name and attribute == name:
            return value
    return getattr(importlib.import_module(module_name), name)


def remember(module: ModuleType, name: str) -> None:
    """Records `module.name` as transformers' object before it is replaced (once: patching
    twice must not record fastcollate's object as the original)."""
    if not any(m is module and a == name for m, a, _ in _replaced):
        _replaced.append((module, name, getattr(module, name)))


def restore_all() -> None:
    """Puts every recorded object back, newest first, and forgets them."""
    while _replaced:
        module, name, value = _replaced.pop()
        setattr(module, name, value)
