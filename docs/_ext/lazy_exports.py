"""A griffe extension for the docs build: `fastcollate` imports a few public names on first use
(through the module's `__getattr__`, so `import fastcollate` stays light), which static analysis
cannot see. For each name in `fastcollate.__all__` that the package does not define statically,
this imports it the way a user would (`getattr(fastcollate, name)`) and adds an alias to where
the object really lives, so `::: fastcollate.Trainer` renders like any other public name."""

from __future__ import annotations

import importlib
from typing import Any

import griffe


class LazyExports(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if pkg.path != "fastcollate":
            return
        module = importlib.import_module("fastcollate")
        for name in module.__all__:
            if name in pkg.members:
                continue
            value = getattr(module, name)
            target = f"{value.__module__}.{value.__qualname__}"
            pkg.set_member(name, griffe.Alias(name, target, parent=pkg))
