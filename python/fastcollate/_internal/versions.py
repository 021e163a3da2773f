"""The version contract: the upstream releases whose results fastcollate's drop-ins are tested to
equal (what CI runs: `.ci/constraints.txt` and `.github/workflows/test.yml`), and the warning
`patch_transformers()` and `patch_trl()` give, once per library, when the installed release is
outside them. docs/compatibility.md shows the same table (tests/project/test_compatibility.py
checks the two agree, and agree with what CI installs)."""

from __future__ import annotations

import re
import threading
import warnings
from importlib import metadata

# distribution -> (oldest, newest) tested release series, "major.minor": a patch release of a
# series counts as that series.
TESTED: dict[str, tuple[str, str]] = {
    "transformers": ("5.0", "5.25"),
    "trl": ("1.16", "1.16"),
    "sentence-transformers": ("6.3", "6.3"),
    "datasets": ("5.2", "5.2"),
    "accelerate": ("1.15", "1.16"),
    "torch": ("2.14", "2.15"),
}


class UntestedVersionWarning(UserWarning):
    """Given once per library by `patch_transformers()` / `patch_trl()` when the installed
    transformers / TRL release is outside the releases fastcollate is tested against (the
    table in docs/compatibility.md): its results may then differ from that release's."""


_warned: set[str] = set()
_warned_lock = threading.Lock()


def series(version: str) -> tuple[int, int] | None:
    """(major, minor) of a version string ("5.24.0", "5.25.0.dev0", "2.15.0+cu128"); None when
    it does not start with two numbers."""
    match = re.match(r"(\d+)\.(\d+)", version)
    return None if match is None else (int(match[1]), int(match[2]))


def is_tested(distribution: str, version: str) -> bool:
    """Whether `version` of `distribution` is within the tested range."""
    found = series(version)
    oldest, newest = (series(bound) for bound in TESTED[distribution])
    return found is not None and oldest is not None and newest is not None and (
        oldest <= found <= newest
    )


def installed_version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def warn_if_untested(distribution: str, caller: str) -> None:
    """Warns (`UntestedVersionWarning`, once per process and library) when the installed
    `distribution` is outside the tested range. For the caller of `caller`, a public function."""
    version = installed_version(distribution)
    if version is None or is_tested(distribution, version):
        return
    with _warned_lock:
        if distribution in _warned:
            return
        _warned.add(distribution)
    oldest, newest = TESTED[distribution]
    tested = oldest if oldest == newest else f"{oldest} to {newest}"
    warnings.warn(
        f"{caller}: {distribution} {version} is not a release fastcollate is tested against "
        f"({distribution} {tested}; see docs/compatibility.md): its drop-ins may give "
        f"results that differ from this {distribution}'s",
        UntestedVersionWarning,
        stacklevel=3,
    )
