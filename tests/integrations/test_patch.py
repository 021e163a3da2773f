"""patch_transformers() round trip in a fresh process (tests/patch_roundtrip.py): every patched
collator and sampler gives transformers' output while patched and after the undo."""

from __future__ import annotations

import os
import subprocess
import sys


def test_every_patched_name_works_patched_and_after_undo():
    script = os.path.join(os.path.dirname(__file__), "patch_roundtrip.py")
    done = subprocess.run(
        [sys.executable, script], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")
