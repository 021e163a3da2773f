"""`PackedStream` and `LengthGroupedStream` on an IMDB-like stream: how full the packed batches
are and how fast rows go through, against the map-style `PackedBatchSampler` over the same
lengths; how much padding length grouping saves against batches in stream order, and how fast
the grouped batches are collated by transformers' `DataCollatorWithPadding` and fastcollate's
(the same batches, one process, the ratio). Release builds only.

The stream: `--rows` rows (lognormal lengths around 230 tokens, capped at 512) yielded by a
generator as dict rows, as a tokenized stream yields them. Efficiency is real tokens /
(batches × max_tokens). Throughput is rows per second through `PackedStream` (reading the
generator included) and, for reference, through the generator alone; `PackedBatchSampler` is
timed from its lengths array (it never reads rows). Best of `--repeat`.

    python benches/bench_packed_stream.py [--rows 200000] [--max-tokens 8192]
        [--buffers 1024 4096 16384] [--repeat 3] [--batch-size 16] [--collate-batches 2000]
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

import fastcollate
from fastcollate.bench.workload import imdb_like_lengths


def stream(lengths: list[int], token_rows: list[list[int]]):
    for n in lengths:
        yield {"input_ids": token_rows[n]}


def best_time(run, repeat: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--max-tokens", type=int, default=8192)
    parser.add_argument("--buffers", type=int, nargs="+", default=[1024, 4096, 16384])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--collate-batches", type=int, default=2000)
    options = parser.parse_args()
    if fastcollate.build_profile != "release":
        raise SystemExit("bench_packed_stream.py: build fastcollate in release mode first")

    lengths = imdb_like_lengths(np.random.default_rng(0), options.rows).tolist()
    # Rows share one list per length: the stream's cost is yielding rows, not building them.
    token_rows = [[1] * n for n in range(max(lengths) + 1)]
    budget = options.max_tokens
    tokens = sum(lengths)
    print(f"{options.rows} IMDB-like rows ({tokens} tokens), max_tokens={budget}; "
          f"python {platform.python_version()}, {platform.machine()}")

    # The streams are torch IterableDatasets: import torch now, not inside the first timing.
    _ = fastcollate.PackedStream, fastcollate.LengthGroupedStream
    plain, _ = best_time(lambda: sum(1 for _ in stream(lengths, token_rows)), options.repeat)
    print(f"{'reading the generator alone':<34} {options.rows / plain:>12,.0f} rows/s")
    print(f"{'':<34} {'batches':>12} {'efficiency':>11} {'rows/s':>12}")
    for buffer in options.buffers:
        def packed(buffer=buffer):
            batches = 0
            for _ in fastcollate.PackedStream(stream(lengths, token_rows), budget, buffer=buffer):
                batches += 1
            return batches

        seconds, batches = best_time(packed, options.repeat)
        print(f"{f'PackedStream buffer={buffer}':<34} {batches:>12} "
              f"{tokens / (batches * budget):>10.2%} {options.rows / seconds:>12,.0f}")
    array = np.asarray(lengths, dtype=np.int64)

    def sampler():
        return len(fastcollate.PackedBatchSampler(array, budget))

    seconds, batches = best_time(sampler, options.repeat)
    print(f"{'PackedBatchSampler window=1024':<34} {batches:>12} "
          f"{tokens / (batches * budget):>10.2%} {options.rows / seconds:>12,.0f}")

    grouped_stream(lengths, token_rows, options)


def pad_fraction(batches: list[list[int]]) -> float:
    """Pad tokens / all tokens when each batch is padded to its longest row."""
    cells = sum(len(b) * max(b) for b in batches)
    return 1 - sum(sum(b) for b in batches) / cells


def grouped_stream(lengths: list[int], token_rows: list[list[int]], options) -> None:
    size = options.batch_size
    print(f"\nLengthGroupedStream, batch_size={size}")
    print(f"{'':<34} {'batches':>12} {'padding':>11} {'rows/s':>12}")
    in_order = [lengths[i: i + size] for i in range(0, len(lengths), size)]
    print(f"{'stream order':<34} {len(in_order):>12} {pad_fraction(in_order):>10.2%}")
    kept: list = []
    for buffer in options.buffers:
        def grouped(buffer=buffer):
            return list(fastcollate.LengthGroupedStream(stream(lengths, token_rows), size,
                                                        buffer=buffer))

        seconds, batches = best_time(grouped, options.repeat)
        sizes = [[len(row["input_ids"]) for row in batch] for batch in batches]
        print(f"{f'LengthGroupedStream buffer={buffer}':<34} {len(batches):>12} "
              f"{pad_fraction(sizes):>10.2%} {len(lengths) / seconds:>12,.0f}")
        kept = batches

    # Collating the grouped batches (the last buffer size's): transformers vs fastcollate.
    import transformers

    from fastcollate.bench.workload import bert_tokenizer

    tokenizer = bert_tokenizer()
    batches = kept[: options.collate_batches]
    theirs = transformers.DataCollatorWithPadding(tokenizer, return_tensors="pt")
    ours = fastcollate.DataCollatorWithPadding(tokenizer, return_tensors="pt")
    for a, b in zip(theirs(batches[0]).items(), ours(batches[0]).items(), strict=True):
        assert a[0] == b[0] and a[1].equal(b[1])
    times = {}
    for _ in range(options.repeat):  # alternated, best of each
        for name, collator in (("transformers", theirs), ("fastcollate", ours)):
            start = time.perf_counter()
            for batch in batches:
                collator(batch)
            elapsed = time.perf_counter() - start
            times[name] = min(times.get(name, elapsed), elapsed)
    print(f"collating {len(batches)} grouped batches with DataCollatorWithPadding: "
          f"transformers {len(batches) / times['transformers']:,.0f} batches/s, fastcollate "
          f"{len(batches) / times['fastcollate']:,.0f} batches/s "
          f"({times['transformers'] / times['fastcollate']:.1f}x)")


if __name__ == "__main__":
    main()
