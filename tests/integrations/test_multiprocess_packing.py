"""Packed, padding-free training in two processes (torchrun, gloo on CPU): every rank runs the
same number of steps on its own shard of token-budget batches, every row is trained on once
per epoch, and the loss is finite and falls. Deselect with `-m "not slow"`."""

from __future__ import annotations

import math

import pytest

from tests.support.torchrun import WORLD_SIZE, launch

pytestmark = pytest.mark.multiprocess

SCRIPT = "tests.support.multiprocess_packed_train"
EPOCHS = 2
BUDGET = 96


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    return launch(tmp_path_factory.mktemp("packed") / "run", seed=0, module=SCRIPT)


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
