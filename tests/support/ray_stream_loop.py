"""The loop tests/integrations/test_ray_streams.py runs on each Ray Train worker (imported there by
name, so it lives in a module of its own): `PackedStream` and `LengthGroupedStream` over this
worker's `get_dataset_shard("train")` for two epochs, with the process group Ray Train set up; the
rows of every batch written to shard{rank}.json."""

from __future__ import annotations

import json
import os

import ray.train

import fastcollate

EPOCHS = 2


def stream_loop(config: dict) -> None:
    rank = ray.train.get_context().get_world_rank()
    shard = ray.train.get_dataset_shard("train")
    streams = {
        "packed": fastcollate.PackedStream(shard, config["max_tokens"], buffer=16, seed=1),
        "grouped": fastcollate.LengthGroupedStream(shard, config["batch_size"], buffer=16,
                                                   seed=1),
    }
    report = {"world": {name: [s.num_replicas, s.rank] for name, s in streams.items()}}
    for name, stream in streams.items():
        report[name] = []
        for epoch in range(EPOCHS):
            stream.set_epoch(epoch)
            report[name].append([[int(row["row"]) for row in batch] for batch in stream])
    with open(os.path.join(config["out"], f"shard{rank}.json"), "w") as f:
        json.dump(report, f)
