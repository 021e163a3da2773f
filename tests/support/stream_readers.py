"""Reading a `PackedStream` / `LengthGroupedStream` as every reader of a training job would:
ranks simulated in this process (`num_replicas=`, `rank=`, no process group), each rank's
DataLoader workers either real (a DataLoader with `num_workers`) or simulated (each worker's
iteration run here under a stand-in `get_worker_info`, merged in the DataLoader's order:
worker by worker in turn, a worker that has run out skipped)."""

from __future__ import annotations

import types
from unittest import mock

import datasets
import torch

import fastcollate


def sharded_source(rows, shards):
    """`rows` rows (`input_ids` of varied lengths, `row` its number) as a whole `datasets` stream
    of `shards` shards."""
    table = {"input_ids": [[7] * (1 + (i * 13) % 40) for i in range(rows)],
             "row": list(range(rows))}
    return datasets.Dataset.from_dict(table).to_iterable_dataset(num_shards=shards)


def make_stream(kind, source, *, budget=64, batch=4, buffer=16, seed=4, **options):
    if kind == "packed":
        return fastcollate.PackedStream(source, budget, buffer=buffer, seed=seed, **options)
    return fastcollate.LengthGroupedStream(source, batch, buffer=buffer, seed=seed, **options)


def _worker_batches(stream, workers, worker):
    info = types.SimpleNamespace(id=worker, num_workers=workers, seed=worker, dataset=stream)
    with mock.patch.object(torch.utils.data, "get_worker_info", return_value=info):
        return [[row["row"] for row in batch] for batch in stream]


def simulated_rank(stream, workers):
    """The row numbers of every batch a DataLoader with `workers` workers (0: none) would
    yield over `stream`, the workers run in turn in this process."""
    if workers == 0:
        return [[row["row"] for row in batch] for batch in stream]
    per_worker = [_worker_batches(stream, workers, worker) for worker in range(workers)]
    merged = []
    for index in range(max(map(len, per_worker))):
        merged.extend(batches[index] for batches in per_worker if index < len(batches))
    return merged


def loaded_rank(stream, workers):
    """The row numbers of every batch a real DataLoader over `stream` yields."""
    loader = torch.utils.data.DataLoader(stream, batch_size=None, num_workers=workers,
                                         collate_fn=lambda rows: [r["row"] for r in rows])
    return list(loader)
