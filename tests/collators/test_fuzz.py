"""Hostile inputs at every entry point (tests/support/fuzz_cases.py builds them from a seed): only a
ValueError / TypeError (or exactly what transformers raises for that input), never a panic or a
crash, input never changed, and transformers' output wherever both succeed.

The calls run in a separate worker process, so an abort or a segfault fails this test (naming
the seed) instead of killing pytest; a dead worker is restarted for the next seed. Replay a
seed with `python -c "from tests.support import fuzz_cases; print(fuzz_cases.run(SEED))"` from
the repository root."""

from __future__ import annotations

import json
import select
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.hypothesis_profiles import examples
from tests.support.repository import child_env

pytestmark = pytest.mark.parity

# Generous: the first call also imports torch and transformers, and CI machines are shared.
SECONDS_PER_CALL = 300


class Worker:
    def __init__(self):
        self.process = None

    def start(self):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.fuzz_cases"],
            env=child_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def run(self, seed: int | str) -> dict:
        if self.process is None or self.process.poll() is not None:
            self.start()
        self.process.stdin.write(f"{seed}\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self.process.stdout], [], [], SECONDS_PER_CALL)
        line = self.process.stdout.readline() if ready else ""
        if not line:
            self.process.kill()
            stderr = self.process.stderr.read()[-2000:]
            self.process = None
            return {"seed": seed, "violations": [f"worker died or hung: {stderr}"]}
        return json.loads(line)

    def stop(self):
        if self.process is not None and self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def worker():
    w = Worker()
    yield w
    w.stop()


# About 15 s here, well inside the minute: the worker makes ~100 calls a second after its
# start (torch, transformers and the tokenizer load once).
@settings(
    max_examples=examples(600),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)
@given(seed=st.integers(0, 2**32 - 1))
def test_hostile_inputs_keep_the_rules(worker, seed):
    result = worker.run(seed)
    assert not result["violations"], result


# The torch-function-mode family (tests/support/fuzz_cases.py `run_under_mode`): every batch of
# tensor rows, under a mode that lies about what a tensor reports or moves the rows' memory
# mid-call.
@settings(
    max_examples=examples(200),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)
@given(seed=st.integers(0, 2**32 - 1))
def test_torch_function_modes_change_nothing(worker, seed):
    result = worker.run(f"mode {seed}")
    assert not result["violations"], result


def test_float_ids_and_later_keys_are_drawn_and_refused(worker):
    # The harness draws both cases (docs/differences.md: refused whatever transformers does),
    # and a call that accepts one is a violation.
    seen = {"float": 0, "later": 0}
    for seed in range(400):
        result = worker.run(seed)
        assert not result["violations"], result
        reason = result.get("refused") or ""
        seen["float"] += "float among" in reason
        seen["later"] += "which row 0 lacks" in reason
    assert seen["float"] > 0 and seen["later"] > 0, seen


def test_worker_reports_a_crash_as_a_violation(worker):
    """The harness itself: an aborting worker is reported (and replaced), not hung on."""
    result = worker.run("abort")
    assert result["violations"] and "worker died" in result["violations"][0]
    assert worker.run(1)["seed"] == 1


def test_construction_check_reports_a_disagreement():
    """The harness itself: an option refused when made (a rule only the constructor applies)
    that the call then takes is reported; a refusal the call repeats is not."""
    from tests.support import fuzz_cases

    assert fuzz_cases.made_as_called("DataCollatorForLanguageModeling", {"mlm_probability": 2.0})
    assert fuzz_cases.made_as_called("DataCollatorForSeq2Seq", {"padding": "bogus"}) is None


def test_comparison_takes_a_deep_copy_for_the_value_it_copies():
    """The harness itself: transformers is given a deep copy of the rows, so a value both pass
    through (a plain object, equal only to itself) comes back as the copy on its side."""
    import copy

    from tests.support import fuzz_cases

    rows = [{"input_ids": [1, 2], "extra": object()}]
    copies: dict = {}
    theirs = copy.deepcopy(rows, copies)
    assert fuzz_cases.same_output(rows, theirs, copies=copies) is None
    assert fuzz_cases.same_output(rows, theirs) is not None
    other = [{"input_ids": [1, 2], "extra": object()}]
    assert fuzz_cases.same_output(rows, other, copies=copies) is not None
