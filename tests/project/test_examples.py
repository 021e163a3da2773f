"""The scripts in examples/ run offline on tiny synthetic data (`--tiny`) with the bundled
MiniLM model and tokenizer: each as a user would start it, in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.repository import ROOT
from tests.support.torchrun import free_port

EXAMPLES = ROOT / "examples"
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


def run(*command: str, cwd: Path) -> str:
    done = subprocess.run(
        command, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # A user running an example on a CPU sees no warning about pinned memory.
    assert "pin_memory" not in done.stderr, done.stderr[-3000:]
    return done.stdout


def test_every_example_has_a_test():
    tested = {
        "imdb_bert.py",
        "packed_causal_lm.py",
        "torchrun_ddp.py",
        "speech_ctc.py",
        "accelerate_stream.py",
    }
    assert {path.name for path in EXAMPLES.glob("*.py")} == tested


@pytest.mark.slow
def test_imdb_bert_fine_tunes_with_fastcollates_trainer(model_path, tmp_path):
    script = str(EXAMPLES / "imdb_bert.py")
    out = run(
        sys.executable, script, "--tiny", "--model", model_path, "--max-steps", "2", cwd=tmp_path
    )
    assert "eval_accuracy" in out


@pytest.mark.slow
def test_packed_causal_lm_trains_padding_free(model_path, tmp_path):
    script = str(EXAMPLES / "packed_causal_lm.py")
    out = run(
        sys.executable,
        script,
        "--tiny",
        "--tokenizer",
        model_path,
        "--max-tokens",
        "256",
        "--max-steps",
        "4",
        cwd=tmp_path,
    )
    assert "trained 4 steps" in out


@pytest.mark.slow
def test_speech_ctc_trains_a_tiny_wav2vec2(tmp_path):
    script = str(EXAMPLES / "speech_ctc.py")
    out = run(sys.executable, script, "--tiny", "--max-steps", "2", cwd=tmp_path)
    assert "trained 2 steps" in out


@pytest.mark.slow
@pytest.mark.multiprocess
def test_torchrun_ddp_runs_on_two_processes(model_path, tmp_path):
    report = tmp_path / "reports" / "run"  # missing: the example creates it
    run(
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        str(EXAMPLES / "torchrun_ddp.py"),
        "--tiny",
        "--tokenizer",
        model_path,
        "--max-tokens",
        "512",
        "--epochs",
        "2",
        "--report",
        str(report),
        cwd=tmp_path,
    )
    ranks = [json.loads((report / f"rank{rank}.json").read_text()) for rank in range(2)]
    assert ranks[0]["steps"] == ranks[1]["steps"] > 0  # equal steps: no rank waits for another
    for rank in ranks:
        assert sum(rank["losses"][-3:]) < sum(rank["losses"][:3])  # it learns


@pytest.mark.slow
@pytest.mark.multiprocess
def test_accelerate_stream_prepares_without_resharding(model_path, tmp_path):
    """`fastcollate.prepare` under 2 torchrun processes: every row of the stream trained once
    per epoch across the ranks (plus the repeated first batch of an uneven last round), both
    ranks as many steps."""
    report = tmp_path / "report"
    report.mkdir()
    run(
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
        "--master_addr=127.0.0.1", f"--master_port={free_port()}",
        str(EXAMPLES / "accelerate_stream.py"), "--tiny", "--tokenizer", model_path,
        "--max-tokens", "256", "--epochs", "2", "--report", str(report),
        cwd=tmp_path,
    )
    ranks = [json.loads((report / f"rank{rank}.json").read_text()) for rank in range(2)]
    assert len(ranks[0]["losses"]) == len(ranks[1]["losses"]) > 0
    total = ranks[0]["dataset_rows"]
    for epoch in range(2):
        batches = [batch for rank in ranks for batch in rank["rows"][epoch]]
        rows = [row for batch in batches for row in batch]
        assert set(rows) == set(range(total))
        # Rows seen twice: only the first batch, repeated to fill an uneven last round.
        assert len(rows) - total <= max(len(batch) for batch in batches)
