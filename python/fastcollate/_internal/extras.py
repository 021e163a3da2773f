"""Optional dependencies: a missing one is reported as the pip command that installs it, for
the place fastcollate was installed from (it is not on a package index yet, so
`pip install 'fastcollate[extra]'` would fail)."""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import re
import shlex
from pathlib import Path
from urllib.parse import unquote, urlparse

DISTRIBUTION = "fastcollate"
# `extra == "x"` in a Requires-Dist marker (the quotes either kind).
_EXTRA_MARKER = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def installed_from() -> Path | None:
    """The source checkout fastcollate was installed from (`pip install .`, `pip install
    '<path>[x]'`, `maturin develop`: pip records it in direct_url.json, PEP 610), or None for
    a wheel file, an index or an unknown origin."""
    try:
        text = importlib.metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:
        return None
    if not text:
        return None
    try:
        record = json.loads(text)
    except ValueError:
        return None
    url = urlparse(record.get("url", ""))
    if "dir_info" not in record or url.scheme != "file":
        return None
    folder = Path(unquote(url.path))
    return folder if (folder / "pyproject.toml").is_file() else None


def extra_requirements(extra: str) -> list[str]:
    """The requirements fastcollate's `extra` adds (its Requires-Dist lines marked
    `extra == "<extra>"`, markers dropped), in the metadata's order; [] when the installed
    metadata cannot be read."""
    try:
        lines = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        return []
    wanted = []
    for line in lines:
        requirement, _, marker = line.partition(";")
        if extra in _EXTRA_MARKER.findall(marker):
            wanted.append(requirement.strip().replace(" ", ""))
    return wanted


def install_command(extra: str) -> str:
    """How to install fastcollate's `extra` from where fastcollate was installed: from its
    source checkout, `pip install '<checkout>[extra]'` (which rebuilds the extension); from a
    wheel file or anywhere else, pip install of the packages the extra names."""
    checkout = installed_from()
    if checkout is not None:
        return (
            f"pip install {shlex.quote(f'{checkout}[{extra}]')} (from the source checkout "
            "fastcollate was installed from; it rebuilds the extension)"
        )
    packages = extra_requirements(extra)
    if packages:
        return "pip install " + " ".join(shlex.quote(p) for p in packages)
    # No metadata (fastcollate imported from a folder on sys.path, not installed).
    return f"pip install '.[{extra}]' in a fastcollate source checkout"


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
