"""fastcollate.Trainer with group_by_length in two processes (torchrun, gloo on CPU): every rank
gets its own equal shard, batches are padded by fastcollate, and the same seed gives the same
run twice. Deselect with `-m "not slow"`."""

from __future__ import annotations

import math

import pytest

from tests.support.torchrun import WORLD_SIZE, launch

pytestmark = pytest.mark.multiprocess

PER_DEVICE_BATCH = 4


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("multiprocess")
    return launch(base / "first", seed=3), launch(base / "second", seed=3)


@pytest.mark.slow
def test_each_rank_trains_on_its_own_equal_shard(two_runs):
    ranks = two_runs[0]
    assert [r["rank"] for r in ranks] == list(range(WORLD_SIZE))
    assert all(r["world_size"] == WORLD_SIZE for r in ranks)
    lengths = ranks[0]["lengths"]
    steps = math.ceil(len(lengths) / (WORLD_SIZE * PER_DEVICE_BATCH))
    seen = []
    for report in ranks:
        assert report["collator"] == "fastcollate.collators.padding.DataCollatorWithPadding"
        assert report["sampler"] == "fastcollate.sampling.samplers.LengthGroupedSampler"
        assert len(report["batches"]) == steps
        rows = [row for batch in report["batches"] for row in batch["rows"]]
        assert all(len(batch["rows"]) == PER_DEVICE_BATCH for batch in report["batches"])
        seen.append(set(rows))
        assert len(rows) == len(set(rows))
    assert not seen[0] & seen[1]
    assert seen[0] | seen[1] == set(range(len(lengths)))


@pytest.mark.slow
def test_batches_are_grouped_by_length_and_padded(two_runs):
    ranks = two_runs[0]
    lengths = ranks[0]["lengths"]
    # The global batch of a step is one mega-batch (8 rows: mega_batch_mult is 2 for 32 rows
    # and batch size 4), sorted longest first; the overall longest row leads the first one.
    assert lengths[ranks[0]["batches"][0]["rows"][0]] == max(lengths)
    for step in range(len(ranks[0]["batches"])):
        rows = [row for report in ranks for row in report["batches"][step]["rows"]]
        tail = [lengths[row] for row in rows[1:]]
        assert tail == sorted(tail, reverse=True), (step, rows)
    for report in ranks:
        pad = report["pad_token_id"]
        for batch in report["batches"]:
            row_lengths = [lengths[row] for row in batch["rows"]]
            width = max(row_lengths)
            for ids, mask, n in zip(
                batch["input_ids"], batch["attention_mask"], row_lengths, strict=True
            ):
                assert len(ids) == width
                assert mask == [1] * n + [0] * (width - n)
                assert ids[n:] == [pad] * (width - n)


@pytest.mark.slow
def test_losses_finite_and_reproducible(two_runs):
    first, second = two_runs
    losses = first[0]["losses"]
    assert len(losses) == len(first[0]["batches"])
    assert all(math.isfinite(loss) for loss in losses)
    # The logged loss is gathered over ranks, so both ranks log the same values.
    assert first[1]["losses"] == losses
    for a, b in zip(first, second, strict=True):
        assert a["batches"] == b["batches"]
        assert a["losses"] == b["losses"]
