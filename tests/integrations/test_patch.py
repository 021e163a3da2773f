"""patch_transformers() round trip in a fresh process (tests/support/patch_roundtrip.py): every
patched collator and sampler gives transformers' output while patched and after the undo."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.repository import child_env

pytestmark = pytest.mark.parity


def test_every_patched_name_works_patched_and_after_undo():
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.patch_roundtrip"],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")
