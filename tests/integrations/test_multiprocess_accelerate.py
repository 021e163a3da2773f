"""Rank-aware batch samplers handed to `accelerator.prepare` in two processes (torchrun, gloo
on CPU): accelerate wraps every batch sampler in its own shard, and the samplers make sure
that every row is still seen exactly once per epoch across ranks (before, one run saw 99 of
200 rows). Deselect with `-m "not slow"`."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.support.multiprocess_accelerate import BUDGET, EPOCHS, ROWS
from tests.support.torchrun import launch

pytestmark = pytest.mark.multiprocess

SCRIPT = "tests.support.multiprocess_accelerate"


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    return launch(tmp_path_factory.mktemp("accelerate") / "run", seed=0, module=SCRIPT)


def per_epoch_rows(ranks, case):
    """For each epoch, a Counter of how often each row was yielded across ranks."""
    assert all("epochs" in r[case] for r in ranks), [r[case].get("error") for r in ranks]
    counts = []
    for epoch in range(EPOCHS):
        counts.append(Counter(row for r in ranks for batch in r[case]["epochs"][epoch]
                              for row in batch))
    return counts


@pytest.mark.slow
@pytest.mark.parametrize("case", ["packed_given", "packed_inferred", "packed_single"])
def test_packed_sees_every_row_once_per_epoch(ranks, case):
    lengths = ranks[0]["lengths"]
    for epoch, counts in enumerate(per_epoch_rows(ranks, case)):
        assert set(counts) == set(range(ROWS))
        # Equal batch counts per rank come from repeating the epoch's first batch or so;
        # nothing else is seen twice.
        batches = [r[case]["epochs"][epoch] for r in ranks]
        assert len(batches[0]) == len(batches[1])
        repeated = sum(counts.values()) - ROWS
        assert repeated <= max(len(b) for rank_batches in batches for b in rank_batches)
        for rank_batches in batches:
            assert all(sum(lengths[row] for row in b) <= BUDGET for b in rank_batches)


@pytest.mark.slow
def test_packed_given_matches_the_sampler_alone(ranks):
    # The prepared loader yields exactly the rank's own batches (no re-sharding), and the same
    # whether num_replicas / rank were given or read from the process group.
    for r in ranks:
        assert r["packed_given"]["epochs"] == r["packed_inferred"]["epochs"]
    assert ranks[0]["packed_given"]["epochs"][0] != ranks[0]["packed_given"]["epochs"][1]


@pytest.mark.slow
def test_rebalance_sees_every_row_once_per_epoch(ranks):
    for counts in per_epoch_rows(ranks, "rebalance_given"):
        # 200 rows in steps of 16 with drop_last=False: the last step's 8 rows are kept.
        assert counts == Counter(range(ROWS))


@pytest.mark.slow
def test_rebalance_wrong_rank_is_an_error(ranks):
    assert "epochs" in ranks[0]["rebalance_default_rank"]  # rank 0 is right there
    assert ranks[1]["rebalance_default_rank"] == {
        "error": "BatchRebalanceSampler was built for rank 0 of 2, but accelerate runs it on "
        "process 1 of 2: give it rank=accelerator.process_index and the number of processes "
        "(accelerator.num_processes)"
    }


@pytest.mark.slow
@pytest.mark.parametrize("case", ["packed_split_batches", "rebalance_split_batches"])
def test_split_batches_is_refused_by_accelerate(ranks, case):
    # Batches of varying size cannot be split evenly; accelerate refuses them at prepare().
    for r in ranks:
        assert "you must have a `batch_size` attribute" in r[case]["error"]
