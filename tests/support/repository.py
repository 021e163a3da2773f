"""The repository root, and the environment of a child process that imports `tests.support`."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def child_pythonpath() -> str:
    """PYTHONPATH for a child process (python -m, torchrun, a Ray worker): the repository root
    (for `tests.support`) before whatever the parent already had (fastcollate's source tree)."""
    return os.pathsep.join(p for p in [str(ROOT), os.environ.get("PYTHONPATH", "")] if p)


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment with `child_pythonpath()` and `extra` set."""
    return {**os.environ, "PYTHONPATH": child_pythonpath(), **extra}
