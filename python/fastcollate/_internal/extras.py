"""Optional dependencies: a missing one is reported as the pip command that installs it."""

from __future__ import annotations

import importlib


def require(feature: str, extra: str, *modules: str) -> None:
    """Imports `modules`; if one is missing, raises ImportError saying that `feature` needs it
    and which extra of fastcollate installs it (`pip install 'fastcollate[extra]'`)."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as err:
            raise ImportError(
                f"{feature} needs {' and '.join(modules)}, but {err}. "
                f"Install it with: pip install 'fastcollate[{extra}]'"
            ) from None
