"""`PackedStream` and `LengthGroupedStream` over Ray Data shards in a Ray Train `TorchTrainer`
(2 CPU workers on a local cluster): each worker packs or groups only its own shard (the stream
sees `get_dataset_shard` and deals nothing out), so every row is trained once per epoch across
the workers, and both workers yield as many batches (evened out over the process group Ray
Train sets up, the shorter one repeating its first batches).

Skipped without Ray (`pip install '.[dev]'` installs it). Deselect with `-m "not slow"`."""

from __future__ import annotations

import json
from collections import Counter

import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")
pytest.importorskip("ray.train.torch")

from tests.support.ray_cluster import local_cluster  # noqa: E402
from tests.support.ray_stream_loop import EPOCHS, stream_loop  # noqa: E402

pytestmark = [pytest.mark.multiprocess, pytest.mark.slow]

ROWS = 200  # Ray Train's equal split leaves no remainder on 2 workers
WORKERS = 2


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    with local_cluster():
        base = tmp_path_factory.mktemp("ray_streams")
        rows = [{"input_ids": list(range(1, 2 + (i * 13) % 37)), "row": i} for i in range(ROWS)]
        trainer = TorchTrainer(
            stream_loop,
            train_loop_config={"out": str(base), "max_tokens": 64, "batch_size": 4},
            # Half a CPU each leaves the other to Ray Data's read tasks.
            scaling_config=ScalingConfig(num_workers=WORKERS, use_gpu=False,
                                         resources_per_worker={"CPU": 0.5}),
            run_config=RunConfig(storage_path=str(base / "storage"), name="streams"),
            datasets={"train": ray.data.from_items(rows, override_num_blocks=4)},
        )
        result = trainer.fit()
        assert result.error is None, result.error
        yield [json.loads((base / f"shard{rank}.json").read_text()) for rank in range(WORKERS)]


@pytest.mark.parametrize("name", ["packed", "grouped"])
def test_every_row_once_per_epoch_across_workers(shards, name):
    for shard in shards:
        # The ranks come from Ray Train's process group; the shard is not dealt out again.
        assert shard["world"][name][0] == WORKERS
    for epoch in range(EPOCHS):
        per_worker = [shard[name][epoch] for shard in shards]
        assert len(per_worker[0]) == len(per_worker[1]) > 0
        seen = Counter()
        for batches in per_worker:
            # A worker's batches are its own rows, then (if it ran out first) repeats of its
            # epoch's first batches, which are the only rows trained twice.
            own = [b for i, b in enumerate(batches) if b not in batches[:i]]
            assert batches[len(own):] == [batches[i % min(8, len(own))] for i in
                                          range(len(batches) - len(own))]
            seen.update(row for batch in own for row in batch)
        assert seen == Counter(range(ROWS))
