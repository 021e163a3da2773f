"""`PackedStream(read_shards=True)` (each reader reads only its own shards of a `datasets`
stream and packs them by itself) beside `read_shards=False` (every reader reads every row and
keeps 1/n of the batches), at `--readers` simulated readers: the DataLoader workers of one
rank (shards are read apart only on one rank), each run in turn in this process under a
stand-in `torch.utils.data.get_worker_info`.

The stream: `--rows` rows with lognormal lengths (median about 230 tokens, capped at 512), in
`--shards` shards (`Dataset.to_iterable_dataset(num_shards=...)`). Rows read are counted as the
source hands them out (a `map` over the stream). Packing efficiency is real tokens / (batches x
max_tokens) over every batch every reader yields; per-reader batch counts are given as they
come out of each reader (the rank's DataLoader takes its workers' batches as they come).
Seconds are each reader's wall time, mean over readers: a loaded or shared machine makes them
noisy, and the ratio of rows read is the figure that does not depend on it.

    python benches/bench_shard_reading.py [--rows 10000] [--shards 64] [--max-tokens 4096]
        [--buffer 1024] [--readers 2 4 8] [--json benches/results/shard_reading.json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
import types
from unittest import mock

import datasets
import numpy as np
import torch

import fastcollate

_READ = [0]


def count_read(row):
    _READ[0] += 1
    return row


def lengths(rows: int, seed: int = 0) -> list[int]:
    rng = np.random.default_rng(seed)
    values = rng.lognormal(mean=np.log(230), sigma=0.6, size=rows).astype(np.int64)
    return np.clip(values, 8, 512).tolist()


def measure(source, readers: int, read_shards: bool, max_tokens: int, buffer: int) -> dict:
    reads, counts, seconds = [], [], []
    tokens = 0
    for reader in range(readers):
        stream = fastcollate.PackedStream(source, max_tokens, buffer=buffer, seed=1,
                                          read_shards=read_shards)
        worker = types.SimpleNamespace(id=reader, num_workers=readers, seed=reader,
                                       dataset=stream)
        _READ[0] = 0
        start = time.perf_counter()
        batches = 0
        with mock.patch.object(torch.utils.data, "get_worker_info", return_value=worker):
            for batch in stream:
                batches += 1
                tokens += sum(len(row["input_ids"]) for row in batch)
        seconds.append(time.perf_counter() - start)
        reads.append(_READ[0])
        counts.append(batches)
    return {
        "readers": readers,
        "mode": "own shards" if read_shards else "read everything",
        "rows_read_per_reader": {"min": min(reads), "max": max(reads),
                                 "mean": sum(reads) / readers},
        "batches_per_reader": {"min": min(counts), "max": max(counts)},
        "packing_efficiency": tokens / (sum(counts) * max_tokens),
        "seconds_per_reader_mean": sum(seconds) / readers,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10000)
    parser.add_argument("--shards", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=4096)
    parser.add_argument("--buffer", type=int, default=1024)
    parser.add_argument("--readers", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--json", default=None, help="write the results here")
    options = parser.parse_args()

    sizes = lengths(options.rows)
    table = {"input_ids": [[7] * n for n in sizes]}
    source = datasets.Dataset.from_dict(table).to_iterable_dataset(num_shards=options.shards)
    source = source.map(count_read)
    results = []
    print(f"{options.rows} rows, {sum(sizes)} tokens, {options.shards} shards, "
          f"max_tokens={options.max_tokens}, buffer={options.buffer}")
    print(f"{'readers':>7} {'mode':>16} {'rows read/reader':>17} {'batches/reader':>15} "
          f"{'efficiency':>10} {'s/reader':>9}")
    for readers in options.readers:
        for read_shards in (False, True):
            result = measure(source, readers, read_shards, options.max_tokens, options.buffer)
            results.append(result)
            read = result["rows_read_per_reader"]
            batches = result["batches_per_reader"]
            print(f"{readers:>7} {result['mode']:>16} {read['mean']:>17.0f} "
                  f"{batches['min']:>7}-{batches['max']:<7} "
                  f"{result['packing_efficiency']:>10.4f} "
                  f"{result['seconds_per_reader_mean']:>9.2f}")
    if options.json:
        record = {
            "environment": {
                "command": "python " + " ".join(sys.argv),
                "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                "cpu": platform.processor() or platform.machine(),
                "python": platform.python_version(),
                "numpy": np.__version__,
                "torch": torch.__version__,
                "datasets": datasets.__version__,
                "fastcollate": fastcollate.__version__,
                "build_profile": fastcollate.build_profile,
                # How loaded the machine was as the run ended (its seconds are noisy then).
                "load_average_1min": os.getloadavg()[0],
            },
            "rows": options.rows,
            "tokens": sum(sizes),
            "shards": options.shards,
            "max_tokens": options.max_tokens,
            "buffer": options.buffer,
            "results": results,
        }
        with open(options.json, "w", encoding="utf-8") as f:
            json.dump(record, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
