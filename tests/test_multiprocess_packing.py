"""Packed, padding-free training in two processes (torchrun, gloo on CPU): every rank runs the
same number of steps on its own shard of token-budget batches, every row is trained on once
per epoch, and the loss is finite and falls. Deselect with `-m "not slow"`."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_multiprocess import free_port

SCRIPT = Path(__file__).with_name("multiprocess_packed_train.py")
WORLD_SIZE = 2
EPOCHS = 2
BUDGET = 96


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("packed")
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={WORLD_SIZE}",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        str(SCRIPT),
        "--out",
        str(out),
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return [json.loads((out / f"rank{rank}.json").read_text()) for rank in range(WORLD_SIZE)]


@pytest.mark.slow
def test_equal_steps_and_disjoint_shards(ranks):
    assert [r["rank"] for r in ranks] == list(range(WORLD_SIZE))
    assert all(r["world_size"] == WORLD_SIZE for r in ranks)
    assert all(r["sampler"] == "TrainerPackedBatchSampler" for r in ranks)
    per_epoch = ranks[0]["batches_per_epoch"]
    assert per_epoch > 1
    assert all(len(r["batches"]) == EPOCHS * per_epoch for r in ranks)
    lengths = ranks[0]["lengths"]
    for epoch in range(EPOCHS):
        shards = [r["batches"][epoch * per_epoch : (epoch + 1) * per_epoch] for r in ranks]
        rows = [[row for batch in shard for row in batch["rows"]] for shard in shards]
        # Disjoint shards that cover every row, except the repeated batches that even out
        # the last round (at most one batch, since there are two ranks).
        repeated = set(rows[0]) & set(rows[1])
        assert set(rows[0]) | set(rows[1]) == set(range(len(lengths)))
        assert len(repeated) <= max(len(b["rows"]) for s in shards for b in s)
        for shard in shards:
            for batch in shard:
                assert batch["tokens"] == sum(lengths[row] for row in batch["rows"]) <= BUDGET
    # The two epochs are packed differently.
    assert ranks[0]["batches"][:per_epoch] != ranks[0]["batches"][per_epoch:]


@pytest.mark.slow
def test_loss_finite_and_falling(ranks):
    losses = ranks[0]["losses"]
    assert len(losses) == len(ranks[0]["batches"])
    assert all(math.isfinite(loss) for loss in losses)
    assert ranks[1]["losses"] == losses  # gathered over ranks
    assert sum(losses[-3:]) < sum(losses[:3])
