"""Replacing objects in another library's modules, and putting them back: the machinery behind
`patch_transformers()` and `patch_trl()`, and `original()`, the library's own object whether or
not it is patched right now.

It lives here, below everything that needs an original (the language-modeling collator's
`mask_rng="torch"`, the Trainer's samplers), so none of them imports a patching module above
it. Each replacement is recorded with its owner ("transformers", "trl"), so undoing one patch
leaves the other in place."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import Any

# (owner, module object, attribute, the object the library had there before patching). The
# attribute may be a dotted path inside the module ("SFTTrainer._prepare_dataset": a method).
_replaced: list[tuple[str, ModuleType, str, Any]] = []

_MISSING = object()


def _holder(module: ModuleType, name: str) -> tuple[Any, str] | None:
    """The object that holds the last part of the dotted `name` in `module`, and that part;
    None when a part on the way is missing."""
    *path, attribute = name.split(".")
    holder: Any = module
    for part in path:
        holder = getattr(holder, part, _MISSING)
        if holder is _MISSING:
            return None
    return holder, attribute


def _lookup(module: ModuleType, name: str) -> Any:
    """`module`'s object at the dotted `name`, or `_MISSING`. A class's attribute is read from
    the class's own namespace (the descriptor itself, not what access makes of it, and not one
    inherited from a base class, which patching there would shadow)."""
    found = _holder(module, name)
    if found is None:
        return _MISSING
    holder, attribute = found
    if isinstance(holder, type):
        return vars(holder).get(attribute, _MISSING)
    return getattr(holder, attribute, _MISSING)


def _put(module: ModuleType, name: str, value: Any) -> None:
    found = _holder(module, name)
    assert found is not None, (module.__name__, name)
    setattr(found[0], found[1], value)


def original(module_name: str, name: str) -> Any:
    """The library's own object, whether or not it is patched right now. `name` may be a
    dotted path inside the module (a class's method)."""
    for _, module, attribute, value in _replaced:
        if module.__name__ == module_name and attribute == name:
            return value
    found = _lookup(importlib.import_module(module_name), name)
    if found is _MISSING:
        raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
    return found


def module_objects(module_name: str) -> list[ModuleType]:
    """Every live module object named `module_name`. transformers' processing_utils re-executes
    `transformers/__init__.py` (direct_transformers_import), which puts a second top-level
    `transformers` module in sys.modules while code that imported earlier holds the first; both
    must be patched."""
    current = sys.modules[module_name]
    found = {id(current): current}
    if "." not in module_name:
        for module in list(sys.modules.values()):
            for value in list(getattr(module, "__dict__", {}).values()):
                # type(), not isinstance(): some objects warn when asked for __class__.
                if issubclass(type(value), ModuleType) and value.__name__ == module_name:
                    found.setdefault(id(value), value)
    return list(found.values())


def apply(owner: str, replacements: dict[tuple[str, str], Any]) -> list[tuple[str, str]]:
    """Puts each `(module name, attribute) -> object` in place (the attribute may be a dotted
    path: `("m", "Class.method")` replaces a class's method), in every live copy of the
    module that has the attribute, recording what was there (once: patching twice must not
    record fastcollate's object as the original). Returns what was patched."""
    # Import every target first: importing some (transformers.trainer) replaces others.
    module_names = sorted({module_name for module_name, _ in replacements})
    for module_name in module_names:
        importlib.import_module(module_name)
    modules = {module_name: module_objects(module_name) for module_name in module_names}
    patched = []
    for (module_name, name), replacement in replacements.items():
        for module in modules[module_name]:
            current = _lookup(module, name)
            if current is _MISSING:
                continue
            if not any(m is module and a == name for _, m, a, _ in _replaced):
                _replaced.append((owner, module, name, current))
            _put(module, name, replacement)
        patched.append((module_name, name))
    return patched


def restore(owner: str) -> None:
    """Puts back everything `owner`'s patch replaced, newest first, and forgets it."""
    for index in range(len(_replaced) - 1, -1, -1):
        entry_owner, module, name, value = _replaced[index]
        if entry_owner == owner:
            _put(module, name, value)
            del _replaced[index]


class Patch:
    """What a `patch_*()` call returns: `undo()` restores the library's objects, and using it
    as a context manager undoes the patch on exit."""

    owner = ""

    def __init__(self, patched: list[tuple[str, str]]):
        self.patched = patched

    def undo(self) -> None:
        """Restores the objects this library's patch replaced."""
        restore(self.owner)

    def __enter__(self) -> Patch:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.undo()

    def __repr__(self) -> str:
        names = sorted({f"{module}.{name}" for module, name in self.patched})
        return f"{type(self).__name__}({', '.join(names)})"
