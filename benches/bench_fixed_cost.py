"""The fixed cost of one collator call: everything but the native collation.

`DataCollatorWithPadding` is timed twice on the same batch: as it is, and with the native
`collate` replaced by a stub that hands back a prepared output (the same keys, already
tensors or arrays, as the native call gives them). The stubbed time, less the stub's own,
is what a call costs in Python around the native work: settings, checks, the container.

    python benches/bench_fixed_cost.py [--batch-sizes 1,8,32] [--formats lists,numpy,torch]

Needs a release build (`pip install .`), transformers and torch.
"""

from __future__ import annotations

import argparse
import sys
import timeit

import numpy as np

import fastcollate
from fastcollate.bench import workload
from fastcollate.collators import native as native_entry


class StubbedNative:
    """Stands in for `fastcollate._native` inside the collators' native entry: `collate`
    returns a fresh copy of one prepared output."""

    def __init__(self, real, output: dict):
        self._real = real
        self._output = output

    def collate(self, *args, **kwargs):
        return dict(self._output)

    def __getattr__(self, name):
        return getattr(self._real, name)


def best_of(function, number: int, repeat: int) -> float:
    """Microseconds per call: the fastest of `repeat` runs of `number` calls."""
    return min(timeit.repeat(function, number=number, repeat=repeat)) / number * 1e6


def measure(collator, batch: list, real, number: int, repeat: int) -> tuple[float, float, float]:
    """(the call, the call with the native collation stubbed, the stub alone), in µs."""
    whole = best_of(lambda: collator(batch), number, repeat)
    # What the native call returns for this batch (tensors under "pt"), recorded once.
    recorded: dict = {}

    def record(*call_args, **call_kwargs):
        out = real.collate(*call_args, **call_kwargs)
        recorded.update(out)
        return out

    recording = StubbedNative(real, {})
    recording.collate = record
    native_entry._native = recording
    try:
        collator(batch)
        stub = StubbedNative(real, recorded)
        native_entry._native = stub
        stubbed = best_of(lambda: collator(batch), number, repeat)
        alone = best_of(stub.collate, number, repeat)
    finally:
        native_entry._native = real
    return whole, stubbed, alone


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-sizes", default="1,8,32", help="(default: %(default)s)")
    parser.add_argument(
        "--formats", default="lists,numpy,torch,torch-format", help="(default: %(default)s)"
    )
    parser.add_argument("--repeat", type=int, default=15, help="(default: %(default)s)")
    args = parser.parse_args(argv)
    if fastcollate.build_profile != "release":
        print(f"error: fastcollate is a {fastcollate.build_profile} build", file=sys.stderr)
        return 1
    tokenizer = workload.bert_tokenizer()
    rows = workload.classification_rows(np.random.default_rng(workload.SEED), 64)
    collator = fastcollate.DataCollatorWithPadding(tokenizer)
    real = native_entry._native
    print(f"fastcollate {fastcollate.__version__}, CPython {sys.version.split()[0]}")
    print("| rows | batch | call µs | stubbed µs | stub alone µs | fixed cost µs |")
    print("|---|---|---|---|---|---|")
    for fmt in args.formats.split(","):
        formatted = workload.as_format(rows, fmt)
        for batch_size in map(int, args.batch_sizes.split(",")):
            whole, stubbed, alone = measure(
                collator, formatted[:batch_size], real, 2000 if batch_size < 32 else 500,
                args.repeat,
            )
            print(
                f"| {fmt} | {batch_size} | {whole:.1f} | {stubbed:.2f} | {alone:.2f} | "
                f"**{stubbed - alone:.2f}** |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
