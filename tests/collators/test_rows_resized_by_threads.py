"""Rows resized by another thread while they are padded (issue 39): `ndarray.resize(...,
refcheck=False)` frees a row's memory under whoever reads it. The feature-extractor padding
once copied borrowed slices with the interpreter released (reads of freed memory, or numpy's
borrow release unwrapping None inside a drop: an abort), and the token padding reads rows in
place; neither may crash, whatever the thread does. Each run is a child process
(`python -m tests.support.hostile`), so a crash fails the test instead of killing pytest, on
both read routes (`FASTCOLLATE_DLPACK_EXCHANGE` on and off). The iterations per run scale with
the hypothesis profile as example counts do (`examples`): an iteration costs far less than the
child's start, so the default run keeps a few dozen and CI runs ten times as many."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests.support.hypothesis_profiles import examples  # noqa: E402

ITERATIONS = examples(300)


@pytest.mark.parametrize("exchange_table", ["1", "0"])
@pytest.mark.parametrize("route", ["frames", "tokens"])
def test_rows_resized_by_a_thread_never_crash(route, exchange_table):
    result = subprocess.run(
        [sys.executable, "-m", "tests.support.hostile", route, str(ITERATIONS)],
        env={**os.environ, "FASTCOLLATE_DLPACK_EXCHANGE": exchange_table},
        capture_output=True, text=True, timeout=600,
    )
    output = result.stdout[-3000:] + result.stderr[-3000:]
    assert result.returncode == 0, f"exit status {result.returncode}:\n{output}"
    assert f"ok {route} {ITERATIONS} iterations" in result.stdout, output
