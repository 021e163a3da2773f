"""Tensor rows read under torch function modes that lie or move memory (issue 35).

The in-place reads take a raw pointer into each row's tensor; a `TorchFunctionMode` (or a
method patched onto `torch.Tensor`) runs Python code whenever torch is asked something, and
could answer falsely (a length, a data pointer, contiguity) or reallocate a row's storage
between its pointer and its read. fastcollate turns modes off while it reads rows and asks
`torch._C.TensorBase`'s own methods, so every case must give exactly the result it gives
outside the mode (and transformers' where transformers is compared), and never crash.

A crash would kill pytest, so the cases (tests/support/torch_mode_cases.py) run in child
processes, once through torch's DLPack exchange table and once without it
(`FASTCOLLATE_DLPACK_EXCHANGE=0`, the route of a torch without the table): a segfault fails
that route's test with the child's output.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.repository import ROOT

pytest.importorskip("torch")

pytestmark = pytest.mark.parity

CASES = ROOT / "tests" / "support" / "torch_mode_cases.py"


@pytest.mark.timeout(900)
@pytest.mark.parametrize("exchange_table", ["1", "0"])
def test_each_route(exchange_table):
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(CASES)],
        env={**os.environ, "FASTCOLLATE_DLPACK_EXCHANGE": exchange_table},
        capture_output=True, text=True, timeout=900,
    )
    output = result.stdout[-4000:] + result.stderr[-4000:]
    assert result.returncode == 0, f"exit status {result.returncode}:\n{output}"
    assert " passed" in result.stdout and "skipped" not in result.stdout, output
