"""The version a wheel built from this tree carries: Cargo's version (SemVer, `0.2.0-dev0`)
written as PEP 440 (`0.2.0.dev0`), as maturin writes it into the wheel's name and metadata.
`python .ci/wheel_version.py` prints it for Cargo.toml's version; `python .ci/wheel_version.py
VERSION` for VERSION. The release scripts (.ci/wheels, .ci/release_smoke_test) find the wheels
by it; tests/project/test_packaging.py runs it on pre-release and release versions."""

from __future__ import annotations

import re
import sys
from pathlib import Path

# SemVer pre-release labels and their PEP 440 spelling.
_PRE_RELEASES = {"alpha": "a", "a": "a", "beta": "b", "b": "b", "rc": "rc", "c": "rc",
                 "pre": "rc", "preview": "rc", "dev": ".dev"}


def wheel_version(cargo_version: str) -> str:
    """`0.2.0-dev0` -> `0.2.0.dev0`, `1.0.0-rc1` -> `1.0.0rc1`, `1.0.0-alpha.2` -> `1.0.0a2`,
    `1.0.0` -> `1.0.0`; a ValueError for what PEP 440 has no spelling of."""
    match = re.fullmatch(r"(\d+\.\d+\.\d+)(?:-([0-9A-Za-z.-]+))?", cargo_version)
    if match is None:
        raise ValueError(f"not a Cargo version without build metadata: {cargo_version!r}")
    release, pre = match.groups()
    if pre is None:
        return release
    label = re.fullmatch(r"([A-Za-z]+)[.-]?(\d*)", pre)
    if label is None or label[1].lower() not in _PRE_RELEASES:
        raise ValueError(f"no PEP 440 spelling of the pre-release {pre!r} in {cargo_version!r}")
    return f"{release}{_PRE_RELEASES[label[1].lower()]}{int(label[2] or 0)}"


ROOT = Path(__file__).resolve().parents[1]


def cargo_version(root: Path = ROOT) -> str:
    """The package version in Cargo.toml."""
    text = (root / "Cargo.toml").read_text(encoding="utf-8")
    found = re.search(r'^version = "([^"]+)"$', text, re.MULTILINE)
    if found is None:
        raise ValueError("no version in Cargo.toml")
    return found[1]


if __name__ == "__main__":
    print(wheel_version(sys.argv[1] if len(sys.argv) > 1 else cargo_version()))
