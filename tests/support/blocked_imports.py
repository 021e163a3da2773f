"""Running code in a child interpreter where named top-level packages cannot be imported, as if
they were not installed."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# Run first in the child interpreter: a finder that makes the named top-level packages
# unimportable, as if they were not installed.
BLOCK_IMPORTS = """
import sys

class BlockImports:
    def __init__(self, names):
        self.names = set(names)

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, BlockImports(BLOCKED))
"""


def run_without(blocked: list[str], code: str) -> subprocess.CompletedProcess:
    script = f"BLOCKED = {blocked!r}\n" + BLOCK_IMPORTS + textwrap.dedent(code)
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
