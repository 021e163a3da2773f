"""group_by_length, fastcollate against transformers, in one process.

Two costs, for synthetic `datasets.Dataset`s of 1M and 10M rows (an `input_ids` list<int32>
column built straight from Arrow offsets, lengths uniform in [8, 120]):

- lengths at Trainer start-up: transformers decodes every row (`len(row["input_ids"])`, as
  LengthGroupedSampler does when the dataset has no length column); fastcollate reads the Arrow
  list offsets (`sequence_lengths`), on the dataset as built and on a shuffled view (indices
  mapping). The transformers figure is timed on the first --decode-rows rows and extrapolated
  linearly to the full size; the table says so.
- grouping, once per epoch: `get_length_grouped_indices` (torch.randperm, mega-batches, sort)
  from a list of lengths, both timed in full on the same generator seed, and their outputs
  compared.

    python benches/bench_grouping.py [--rows 1000000 10000000] [--batch-size 8]
"""

from __future__ import annotations

import argparse
import gc
import platform
import time
from collections.abc import Callable

import datasets
import numpy as np
import pyarrow as pa
import torch
from transformers import trainer_pt_utils

import fastcollate


def build_dataset(rows: int, seed: int = 0) -> tuple[datasets.Dataset, np.ndarray]:
    lengths = np.random.default_rng(seed).integers(8, 121, size=rows).astype(np.int32)
    offsets = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = pa.array(np.zeros(int(offsets[-1]), dtype=np.int32))
    column = pa.LargeListArray.from_arrays(pa.array(offsets), values)
    table = datasets.table.InMemoryTable(pa.table({"input_ids": column}))
    # A fixed fingerprint: otherwise datasets hashes the whole table (seconds per million rows).
    return datasets.Dataset(table, fingerprint=f"bench-{rows}-{seed}"), lengths.astype(np.int64)


def best_of(fn: Callable[[], object], repeat: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def transformers_lengths(dataset: datasets.Dataset) -> list[int]:
    return [len(feature["input_ids"]) for feature in dataset]


def fmt(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:8.2f} s "
    return f"{seconds * 1e3:8.1f} ms"


def bench(rows: int, options: argparse.Namespace) -> None:
    dataset, expected = build_dataset(rows)
    shuffled = dataset.shuffle(seed=0, keep_in_memory=True)

    decode = min(options.decode_rows, rows)
    subset = dataset.select(range(decode))
    decode_time, decoded = best_of(lambda: transformers_lengths(subset), 1)
    assert decoded == expected[:decode].tolist()
    hf_lengths = decode_time * rows / decode

    fc_time, ours = best_of(lambda: fastcollate.sequence_lengths(dataset), options.repeat)
    assert np.array_equal(ours, expected)
    fc_shuffled, ours = best_of(lambda: fastcollate.sequence_lengths(shuffled), options.repeat)
    order = shuffled._indices.column(0).to_numpy()
    assert np.array_equal(ours, expected[order])
    note = f"(extrapolated from {decode:,} rows)"
    print(
        f"{rows:>11,}  {'lengths: decode rows / Arrow offsets':<36} {fmt(hf_lengths):>14}"
        f" {fmt(fc_time):>12} {hf_lengths / fc_time:>8.0f}x  {note}"
    )
    print(
        f"{rows:>11,}  {'lengths, shuffled view':<36} {fmt(hf_lengths):>14}"
        f" {fmt(fc_shuffled):>12} {hf_lengths / fc_shuffled:>8.0f}x  {note}"
    )

    as_list = expected.tolist()
    hf_group, theirs = best_of(
        lambda: trainer_pt_utils.get_length_grouped_indices(
            as_list, options.batch_size, generator=torch.Generator().manual_seed(0)
        ),
        1,
    )
    fc_group, ours = best_of(
        lambda: fastcollate.get_length_grouped_indices(
            expected, options.batch_size, generator=torch.Generator().manual_seed(0)
        ),
        options.repeat,
    )
    assert ours == theirs
    del theirs, ours
    print(
        f"{rows:>11,}  {'grouping (one epoch)':<36} {fmt(hf_group):>14} {fmt(fc_group):>12}"
        f" {hf_group / fc_group:>8.1f}x"
    )
    # What the DataLoader consumes each epoch: the sampler's iterator, drained.
    theirs_sampler = trainer_pt_utils.LengthGroupedSampler(
        options.batch_size, lengths=as_list, generator=torch.Generator().manual_seed(0)
    )
    hf_sampler, _ = best_of(lambda: list(theirs_sampler), 1)
    sampler = fastcollate.LengthGroupedSampler(
        options.batch_size, dataset=dataset, generator=torch.Generator().manual_seed(0)
    )
    fc_sampler, _ = best_of(lambda: list(sampler), options.repeat)
    print(
        f"{rows:>11,}  {'LengthGroupedSampler epoch':<36} {fmt(hf_sampler):>14}"
        f" {fmt(fc_sampler):>12} {hf_sampler / fc_sampler:>8.1f}x"
    )
    gc.collect()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--decode-rows", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    if fastcollate.build_profile != "release":
        raise SystemExit("fastcollate is a debug build: maturin develop --release first")

    print(
        f"fastcollate {fastcollate.__version__} ({fastcollate.build_profile}), datasets "
        f"{datasets.__version__}, torch {torch.__version__}, {platform.processor() or 'cpu'}, "
        f"batch_size={options.batch_size}"
    )
    header = f"{'rows':>11}  {'step':<36} {'transformers':>14} {'fastcollate':>12} {'speed-up':>9}"
    print(header)
    print("-" * len(header))
    for rows in options.rows:
        bench(rows, options)
        gc.collect()


if __name__ == "__main__":
    main()
