"""Replacing objects in another library's modules, and putting them back: the machinery behind
`patch_transformers()` and `patch_trl()`, and `original()`, the library's own object whether or
not it is patched right now.

It lives here, below everything that needs an original (the language-modeling collator's
`mask_rng="torch"`, the Trainer's samplers), so none of them imports a patching module above
it.

Every `patch_*()` call returns a handle (a `Patch`) that holds each place it replaced. A place
remembers the library's object once, when its first hold is taken, and gets it back when its
last hold ends: leaving an inner `with patch_transformers():` or undoing a second handle leaves
the other holds (and the patch) in place, and `unpatch_transformers()` ends every hold of its
owner ("transformers", "trl"), leaving the other owner's. One lock covers the records and the
module attributes, so threads patching and unpatching at once cannot record fastcollate's own
object as the library's."""

from __future__ import annotations

import importlib
import sys
import threading
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

_MISSING = object()

# Held while the records below are read or changed, and while the attributes they describe are
# set (re-entrant: an attribute read may import a module whose code asks for an original).
_lock = threading.RLock()


@dataclass
class _Place:
    """One replaced attribute: where it is, the library's object there, and the holds on it
    (oldest first; the newest one's replacement is the one in place)."""

    module_name: str
    name: str
    holder: Any
    attribute: str
    original: Any
    holds: list[tuple[Patch, Any]] = field(default_factory=list)


# (id of the object holding the attribute, attribute) -> its record, while a hold is on it.
# Keyed by the holder, not the module: two module objects that reach the same class share it.
_places: dict[tuple[int, str], _Place] = {}
# Every object fastcollate has put in place, by id (kept alive, so an id is never reused): what
# must never be taken for the library's own object.
_installed: dict[int, Any] = {}
# (module name, dotted name) -> the library's object first found there: where an original comes
# from for a module object that shows fastcollate's object without having been patched (a copy
# of the module made while patched).
_first_seen: dict[tuple[str, str], Any] = {}


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


def _own_attribute(holder: Any, attribute: str) -> Any:
    """`holder`'s object at `attribute`, or `_MISSING`. A class's attribute is read from the
    class's own namespace (the descriptor itself, not what access makes of it, and not one
    inherited from a base class, which patching there would shadow)."""
    if isinstance(holder, type):
        return vars(holder).get(attribute, _MISSING)
    return getattr(holder, attribute, _MISSING)


def _lookup(module: ModuleType, name: str) -> Any:
    """`module`'s object at the dotted `name`, or `_MISSING`."""
    found = _holder(module, name)
    if found is None:
        return _MISSING
    return _own_attribute(*found)


def original(module_name: str, name: str) -> Any:
    """The library's own object, whether or not it is patched right now. `name` may be a
    dotted path inside the module (a class's method). Never one of fastcollate's
    replacements."""
    # Read outside the lock (it may import); checked against the records under it.
    found = _lookup(importlib.import_module(module_name), name)
    with _lock:
        for place in _places.values():
            if place.module_name == module_name and place.name == name:
                return place.original
        if id(found) in _installed:
            # Read while a patch was being undone: the library's object is back by now.
            found = _first_seen.get((module_name, name), _MISSING)
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


def _take_hold(handle: Patch, module_name: str, name: str, holder: Any, attribute: str,
               replacement: Any) -> bool:
    """Puts `replacement` at `holder.attribute` for `handle` (the lock held), recording the
    library's object there when this is the place's first hold. False when there is no such
    attribute."""
    key = (id(holder), attribute)
    place = _places.get(key)
    if place is None:
        current = _own_attribute(holder, attribute)
        if current is _MISSING:
            return False
        if id(current) in _installed:
            current = _first_seen.get((module_name, name), _MISSING)
            if current is _MISSING:
                raise RuntimeError(
                    f"{module_name}.{name} holds fastcollate's object, but no patch of it is "
                    "recorded and the library's own object is unknown"
                )
        else:
            _first_seen.setdefault((module_name, name), current)
        place = _Place(module_name, name, holder, attribute, current)
        _places[key] = place
    if any(held is handle for held, _ in place.holds):
        return True  # the same holder reached through another module object
    place.holds.append((handle, replacement))
    _installed[id(replacement)] = replacement
    setattr(holder, attribute, replacement)
    return True


def apply(handle: Patch, replacements: dict[tuple[str, str], Any]) -> list[tuple[str, str]]:
    """Puts each `(module name, attribute) -> object` in place for `handle` (the attribute may
    be a dotted path: `("m", "Class.method")` replaces a class's method), in every live copy of
    the module that has the attribute. Returns what was patched."""
    # Import every target first: importing some (transformers.trainer) replaces others. Then
    # read each place once outside the lock, so that lazy modules import what they resolve
    # to before the lock is taken.
    module_names = sorted({module_name for module_name, _ in replacements})
    for module_name in module_names:
        importlib.import_module(module_name)
    modules = {module_name: module_objects(module_name) for module_name in module_names}
    for module_name, name in replacements:
        for module in modules[module_name]:
            _lookup(module, name)
    patched = []
    with _lock:
        for (module_name, name), replacement in replacements.items():
            for module in modules[module_name]:
                found = _holder(module, name)
                if found is not None:
                    _take_hold(handle, module_name, name, found[0], found[1], replacement)
            patched.append((module_name, name))
    return patched


def release(handle: Patch) -> None:
    """Ends `handle`'s holds: each place it held gets the newest remaining hold's object, or
    the library's own when no hold remains. Does nothing for a handle already released."""
    with _lock:
        for key, place in list(_places.items()):
            holds = [(held, obj) for held, obj in place.holds if held is not handle]
            if len(holds) == len(place.holds):
                continue
            place.holds = holds
            if holds:
                setattr(place.holder, place.attribute, holds[-1][1])
            else:
                setattr(place.holder, place.attribute, place.original)
                del _places[key]


def restore(owner: str) -> None:
    """Ends every hold of `owner`'s patches (`unpatch_transformers()`, `unpatch_trl()`)."""
    with _lock:
        handles = {id(held): held for place in _places.values() for held, _ in place.holds
                   if held.owner == owner}
        for handle in handles.values():
            release(handle)


class Patch:
    """What a `patch_*()` call returns: `undo()` ends this call's patch (the library's objects
    come back once no other patch of them is held), and using it as a context manager undoes
    it on exit."""

    owner = ""

    def __init__(self, replacements: dict[tuple[str, str], Any]):
        self.patched = apply(self, replacements)

    def undo(self) -> None:
        """Ends this handle's patch: the objects it replaced go back to the library's own
        unless another patch still holds them. Undoing twice does nothing."""
        release(self)

    def __enter__(self) -> Patch:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.undo()

    def __repr__(self) -> str:
        names = sorted({f"{module}.{name}" for module, name in self.patched})
        return f"{type(self).__name__}({', '.join(names)})"
