"""Output-buffer providers and torch function modes that mutate, resize, free or lie (issue 39).

fastcollate writes a batch into the tensors a provider gives (`collate(...,
output_buffer=...)`, and `pad(..., pin_memory=True)`, whose provider calls `torch.empty`). Every
Python-level answer is taken before the first pointer: every provider call, every check
(memory torch allocated, asked of torch's C methods with torch functions off, so a patched
method or a mode cannot answer), then the pointers, then the writes, with no Python in between.
So a provider that resizes or frees a buffer it gave, swaps it onto a read-only memory map,
gives one twice, appends or removes rows, or a mode that moves every buffer on each torch call,
gets either the batch the rows held when the call began or a ValueError naming the key, and
never a write into freed or read-only memory.

A crash would kill pytest, so the cases (tests/support/hostile_provider_cases.py) run in child
processes, under this run's hypothesis profile, once through torch's DLPack exchange table and
once without it (`FASTCOLLATE_DLPACK_EXCHANGE=0`, where no buffer is asked for and every output
is fastcollate's own): a segfault fails that route's test with the child's output.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.repository import ROOT

pytest.importorskip("torch")

CASES = ROOT / "tests" / "support" / "hostile_provider_cases.py"


@pytest.mark.timeout(900)
@pytest.mark.parametrize("exchange_table", ["1", "0"])
def test_each_route(exchange_table, request):
    profile = request.config.getoption("hypothesis_profile") or "default"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         f"--hypothesis-profile={profile}", str(CASES)],
        env={**os.environ, "FASTCOLLATE_DLPACK_EXCHANGE": exchange_table},
        capture_output=True, text=True, timeout=900,
    )
    output = result.stdout[-4000:] + result.stderr[-4000:]
    assert result.returncode == 0, f"exit status {result.returncode}:\n{output}"
    assert " passed" in result.stdout and "skipped" not in result.stdout, output
