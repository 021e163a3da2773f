"""PackedStream, LengthGroupedStream and packed / length-grouped training on a stream in two
processes (torchrun, gloo on CPU): each rank keeps its own batches, every row is seen once per
epoch across ranks and workers, and both ranks take the same number of steps. Deselect with
`-m "not slow"`."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.support.multiprocess_packed_stream import (
    BUDGET,
    EPOCHS,
    GROUP_BATCH,
    ROWS,
    WORKER_SETTINGS,
)
from tests.support.torchrun import launch

pytestmark = pytest.mark.multiprocess

SCRIPT = "tests.support.multiprocess_packed_stream"


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    return launch(tmp_path_factory.mktemp("packed_stream") / "run", seed=0, module=SCRIPT)


@pytest.mark.slow
def test_every_row_once_per_epoch_across_ranks_and_workers(ranks):
    assert [(r["world"], r["packed_rank"]) for r in ranks] == [(2, 0), (2, 1)]
    lengths = ranks[0]["lengths"]
    for epoch in range(EPOCHS):
        batches = [r["epochs"][epoch] for r in ranks]
        assert len(batches[0]) == len(batches[1])  # the ranks end the epoch together
        counts = Counter(row for rank_batches in batches for b in rank_batches for row in b)
        assert set(counts) == set(range(ROWS))
        assert sum(counts.values()) == ROWS  # every row once
        assert all(sum(lengths[row] for row in b) <= BUDGET for rb in batches for b in rb)
    assert ranks[0]["epochs"][0] != ranks[0]["epochs"][1]


@pytest.mark.slow
def test_packed_training_on_a_stream(ranks):
    lengths = ranks[0]["lengths"]
    trained = [r["trained"] for r in ranks]
    assert len(trained[0]) == len(trained[1]) == 12
    assert all(sum(lengths[row] for row in b) <= BUDGET for t in trained for b in t)
    # The first epoch: each rank its own batches, every row once.
    steps = ranks[0]["first_epoch_steps"]
    assert steps == ranks[1]["first_epoch_steps"] < 12
    counts = Counter(row for t in trained for b in t[:steps] for row in b)
    assert counts == Counter(range(ROWS))


@pytest.mark.slow
def test_grouped_stream_every_row_once_per_epoch_across_ranks_and_workers(ranks):
    lengths = ranks[0]["lengths"]
    for epoch in range(EPOCHS):
        batches = [r["grouped_epochs"][epoch] for r in ranks]
        assert len(batches[0]) == len(batches[1])  # the ranks end the epoch together
        counts = Counter(row for rank_batches in batches for b in rank_batches for row in b)
        assert set(counts) == set(range(ROWS))
        # 90 rows: 22 whole batches and one of 2, 23 batches for two ranks: the last two
        # rounds are cut again into four batches, every row once.
        assert counts == Counter(range(ROWS))
        assert len(batches[0]) == 12 and max(len(b) for rb in batches for b in rb) == GROUP_BATCH
        # Grouped by length: each batch a narrow range of lengths.
        spread = [max(lengths[r] for r in b) - min(lengths[r] for r in b)
                  for rb in batches for b in rb]
        assert sum(spread) / len(spread) < 8
    assert ranks[0]["grouped_epochs"][0] != ranks[0]["grouped_epochs"][1]


@pytest.mark.slow
def test_group_by_length_training_on_a_stream(ranks):
    trained = [r["group_trained"] for r in ranks]
    assert len(trained[0]) == len(trained[1]) == 24
    steps = ranks[0]["group_epoch_steps"]
    assert steps == ranks[1]["group_epoch_steps"] == 12  # 23 batches over two ranks
    for epoch in range(2):
        part = [t[epoch * steps:(epoch + 1) * steps] for t in trained]
        counts = Counter(row for t in part for b in t for row in b)
        assert counts == Counter(range(ROWS))  # every row once
    assert trained[0][:steps] != trained[0][steps:]


@pytest.mark.slow
def test_accelerate_prepare_is_refused_on_every_rank(ranks):
    # accelerate would dispatch the batches from rank 0 (which holds only its own) or cut each
    # rank's batches again: rows lost. Both ranks raise before the first batch, whatever the
    # workers (none, forked where the platform can fork, spawned), so neither waits for the other.
    for name in ("PackedStream", "LengthGroupedStream"):
        for dispatch, how in ((None, "dispatch its batches from process 0"),
                              (False, "cut each process's batches into per-process slices")):
            for workers in (f"workers={n} {context}" for n, context in WORKER_SETTINGS):
                for report in ranks:
                    outcome = report["prepared"][f"{name} dispatch={dispatch} {workers}"]
                    assert outcome.startswith(
                        f"ValueError: {name} was prepared by accelerate on 2 processes: "
                        f"accelerate would {how}"), outcome
                    assert outcome.endswith("or train with fastcollate.Trainer, which prepares "
                                            "it without re-sharding"), outcome
