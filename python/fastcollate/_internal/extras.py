"""Optional dependencies: a missing one is reported as the pip command that installs it."""

from __future__ import annotations

import importlib


def install_command(extra: str) -> str:
    """How to install fastcollate's `extra`: from a package index once fastcollate is released
    there, and from a source checkout (fastcollate is not on PyPI yet, so both are given)."""
    return (
        f"pip install 'fastcollate[{extra}]' (from a package index) "
        f"or pip install '.[{extra}]' (in a fastcollate source checkout)"
    )


def require(feature: str, extra: str, *modules: str) -> None:
    """Imports `modules`; if one is missing, raises ImportError saying that `feature` needs it
    and how to install the extra of fastcollate that brings it (`install_command`)."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as err:
            raise ImportError(
                f"{feature} needs {' and '.join(modules)}. {why_not(module, err)} "
                f"Install {'it' if len(modules) == 1 else 'them'} with: {install_command(extra)}."
            ) from None


def why_not(module: str, err: ImportError) -> str:
    """A sentence saying why `module` cannot be imported: not installed, or (Python's own
    words quoted) failing as it is imported."""
    missing = getattr(err, "name", None)
    package = module.split(".")[0]
    if missing is not None and missing.split(".")[0] == package:
        return f"{package} is not installed."
    return f"Importing {module} failed ({err})."
