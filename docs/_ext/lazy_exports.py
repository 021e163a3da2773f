"""A griffe extension for the docs build: `fastcollate` imports a few public names on first use
(through the module's `__getattr__` and its `_LAZY` table, so `import fastcollate` stays light),
which griffe's static analysis does not follow. For each name in `_LAZY`, this adds an alias to
the module the table names, so `::: fastcollate.Trainer` renders like any other public name.

The table is read from `fastcollate/__init__.py`'s syntax tree, never imported: the docs build
needs only the `docs` extra, not torch, transformers, TRL or Ray (the lazy modules import them).
"""

from __future__ import annotations

import ast
from typing import Any

import griffe


def lazy_exports(source: str, package: str) -> dict[str, str]:
    """name -> the dotted path of the object, from the `_LAZY = {name: (".module", ...)}`
    assignment in the package's `__init__.py` source."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "_LAZY" for t in node.targets
        ):
            table = ast.literal_eval(node.value)
            return {
                name: f"{package}{module}.{name}" if module.startswith(".") else f"{module}.{name}"
                for name, (module, *_) in table.items()
            }
    raise ValueError(f"{package}/__init__.py has no _LAZY table")


class LazyExports(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        if pkg.path != "fastcollate":
            return
        init = pkg.filepath
        if isinstance(init, list):  # a namespace package has no __init__.py
            return
        for name, target in lazy_exports(init.read_text(encoding="utf-8"), pkg.path).items():
            if name not in pkg.members:
                pkg.set_member(name, griffe.Alias(name, target, parent=pkg))
