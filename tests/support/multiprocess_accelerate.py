"""Rank-aware batch samplers through `accelerator.prepare`, run by
tests/integrations/test_multiprocess_accelerate.py under torchrun (2 processes, gloo on CPU). Each
rank writes OUT/rank{N}.json: per case, the dataset rows of every batch its prepared loader yielded
per epoch, or the error the case raised."""

from __future__ import annotations

import argparse

import torch
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration

import fastcollate
from fastcollate.sampling.rebalance import BatchRebalanceSampler
from tests.support.rank_report import finish_rank

ROWS = 200
BUDGET = 64
EPOCHS = 2


def row_lengths(seed: int) -> list[int]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(1, 40, (ROWS,), generator=generator).tolist()


def epochs_seen(accelerator: Accelerator, sampler) -> list[list[list[int]]]:
    """Rows of every batch the prepared loader yields, per epoch. The dataset is the row
    indices themselves, so a batch is the list of rows it holds."""
    loader = torch.utils.data.DataLoader(
        list(range(ROWS)), batch_sampler=sampler, collate_fn=lambda rows: rows
    )
    prepared = accelerator.prepare(loader)
    seen = []
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        batches = list(prepared)
        assert len(batches) == len(prepared), (len(batches), len(prepared))
        seen.append(batches)
    return seen


def attempt(build) -> dict:
    try:
        return {"epochs": build()}
    except ValueError as err:
        return {"error": str(err)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args()

    accelerator = Accelerator(cpu=True)
    world, rank = accelerator.num_processes, accelerator.process_index
    lengths = row_lengths(options.seed)
    splitting = Accelerator(cpu=True, dataloader_config=DataLoaderConfiguration(split_batches=True))

    def packed(acc, **world_args):
        sampler = fastcollate.PackedBatchSampler(lengths, BUDGET, **world_args)
        return lambda: epochs_seen(acc, sampler)

    def rebalance(acc, **rank_args):
        sampler = BatchRebalanceSampler(lengths, 16, world, 2, drop_last=False, **rank_args)
        return lambda: epochs_seen(acc, sampler)

    cases = {
        # The README's recipe, then prepared: each rank's own batches, once.
        "packed_given": packed(accelerator, num_replicas=world, rank=rank),
        # num_replicas and rank read from the process group accelerate started.
        "packed_inferred": packed(accelerator),
        # Built for one process: an ordinary batch sampler that accelerate shards itself.
        "packed_single": packed(accelerator, num_replicas=1, rank=0),
        "rebalance_given": rebalance(accelerator, rank=rank),
        # Every rank claims rank 0 (transformers' default): an error, not lost rows.
        "rebalance_default_rank": rebalance(accelerator),
        "packed_split_batches": packed(splitting, num_replicas=world, rank=rank),
        "rebalance_split_batches": rebalance(splitting, rank=rank),
    }
    report = {"rank": rank, "world_size": world, "lengths": lengths}
    report.update({name: attempt(build) for name, build in cases.items()})
    finish_rank(options.out, rank, report)


if __name__ == "__main__":
    main()
