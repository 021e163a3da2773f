"""Names a package hands out on first use, so importing it does not import what they need
(torch, transformers, TRL, Ray): the one mechanism every package with such names uses."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from .extras import require

# name -> (the module that defines it, relative to the package; the extra of fastcollate that
# installs what it needs; the modules it needs).
LazyTable = Mapping[str, tuple[str, str, tuple[str, ...]]]


def lazy_exports(
    package: str, namespace: dict[str, Any], table: LazyTable
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of `package` (whose globals are `namespace`) for the
    names of `table`: a name is imported on first use, after `require` has checked that what it
    needs is installed (an ImportError says how to install it), then kept in `namespace`; `dir()`
    lists the names before they are loaded."""

    def __getattr__(name: str) -> Any:
        entry = table.get(name)
        if entry is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, extra, needs = entry
        require(f"{package}.{name}", extra, *needs)
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(table))

    return __getattr__, __dir__
