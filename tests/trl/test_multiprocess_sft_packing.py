"""`patch_trl()` with SFTTrainer packing in two processes (torchrun, gloo on CPU): on each rank
the patched run prepares the same packed dataset, trains on the same batches and computes the
same loss, step for step, as TRL alone; the ranks get different batches. Deselect with
`-m "not slow"`."""

from __future__ import annotations

import math

import pytest

from tests.support.torchrun import WORLD_SIZE, launch

pytestmark = [pytest.mark.parity, pytest.mark.multiprocess]

pytest.importorskip("trl", reason="TRL needs Python >= 3.11 (the trl extra)")

SCRIPT = "tests.support.multiprocess_sft_packing"
STEPS = 4


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    return launch(tmp_path_factory.mktemp("sft_packing") / "run", seed=0, module=SCRIPT)


@pytest.mark.slow
def test_each_rank_trains_like_trl_patched(ranks):
    assert [r["trl"]["rank"] for r in ranks] == list(range(WORLD_SIZE))
    for report in ranks:
        theirs, ours = report["trl"], report["patched"]
        assert theirs["world_size"] == ours["world_size"] == WORLD_SIZE
        assert theirs["collator"].startswith("trl.")
        assert ours["collator"] == (
            "fastcollate.trl.language_modeling.DataCollatorForLanguageModeling"
        )
        assert theirs["preparation"] == "trl.trainer.sft_trainer"
        assert ours["preparation"] == "fastcollate.trl.sft_trainer_preparation"
        assert len(theirs["batches"]) == STEPS
        assert ours["dataset"] == theirs["dataset"]
        assert "seq_lengths" in theirs["dataset"]["columns"]
        pairs = zip(ours["batches"], theirs["batches"], strict=True)
        for step, (mine, trl_batch) in enumerate(pairs):
            assert mine == trl_batch, step
        assert all(math.isfinite(batch["loss"]) for batch in theirs["batches"])
        assert ours["losses"] == theirs["losses"] and len(theirs["losses"]) == STEPS


@pytest.mark.slow
def test_ranks_train_on_different_batches(ranks):
    first, second = (report["trl"]["batches"] for report in ranks)
    assert [b["input_ids"] for b in first] != [b["input_ids"] for b in second]
    # Packed: one row per batch, documents told apart by position_ids restarting at 0.
    for batch in first + second:
        assert len(batch["input_ids"]) == 1
        assert batch["position_ids"][0].count(0) >= 2
