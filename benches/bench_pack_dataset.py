"""`pack_dataset`, fastcollate against TRL 1.16 (`trl.data_utils.pack_dataset`), end to end:
from a tokenized `datasets.Dataset` to the packed `datasets.Dataset`. Release builds only.

The data: IMDB-like rows (lognormal lengths around 230 tokens, capped at 512), an `input_ids`
column (int32) and an `attention_mask`-like column (int8), the table cut into 1,000-row record
batches as a dataset written by `map` is. Each strategy, TRL once and fastcollate `--repeat`
times (best kept); the outputs are compared (TRL's per-batch packing) before timing is reported.
Fill is the share of `seq_length` × rows that holds tokens.

    python benches/bench_pack_dataset.py [--rows 200000 1000000] [--seq-length 2048]
        [--skip-trl-above 1000000]
"""

from __future__ import annotations

import argparse
import functools
import os
import platform

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")

import datasets  # noqa: E402
import pyarrow as pa  # noqa: E402
import trl  # noqa: E402
from trl.data_utils import pack_dataset as trl_pack_dataset  # noqa: E402

import fastcollate  # noqa: E402
from fastcollate.bench.timing import time_once  # noqa: E402
from fastcollate.bench.trl_workload import filled_share, imdb_like_dataset  # noqa: E402
from fastcollate.trl import pack_dataset  # noqa: E402

STRATEGIES = ("bfd", "bfd_split", "wrapped")


def same(ours: datasets.Dataset, theirs: datasets.Dataset) -> bool:
    if ours.features != theirs.features or len(ours) != len(theirs):
        return False
    return all(
        ours.data.column(name).combine_chunks().equals(theirs.data.column(name).combine_chunks())
        for name in ours.column_names
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[200_000, 1_000_000])
    parser.add_argument("--seq-length", type=int, default=2048)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-trl-above", type=int, default=10**9)
    args = parser.parse_args()
    if fastcollate.build_profile != "release":
        raise SystemExit(
            f"fastcollate is a {fastcollate.build_profile} build; benchmark a release one"
        )
    datasets.disable_caching()
    print(
        f"python {platform.python_version()}, datasets {datasets.__version__}, "
        f"pyarrow {pa.__version__}, trl {trl.__version__}, {os.cpu_count()} CPUs; "
        f"seq_length {args.seq_length}"
    )
    print(
        f"{'rows':>9} {'strategy':>10} {'TRL s':>8} {'fast s':>8} {'ratio':>7} "
        f"{'fill TRL':>9} {'fill fast':>9}"
    )
    for rows in args.rows:
        dataset = imdb_like_dataset(rows)
        for strategy in STRATEGIES:
            best = float("inf")
            for _ in range(args.repeat):
                seconds, ours = time_once(
                    functools.partial(pack_dataset, dataset, args.seq_length, strategy)
                )
                best = min(best, seconds)
            trl_seconds, theirs = float("nan"), None
            if rows <= args.skip_trl_above:
                trl_seconds, theirs = time_once(
                    functools.partial(trl_pack_dataset, dataset, args.seq_length, strategy)
                )
                if not same(ours, theirs):
                    raise SystemExit(f"outputs differ: {rows} rows, {strategy}")
            trl_fill = filled_share(theirs, args.seq_length) if theirs is not None else float("nan")
            our_fill = filled_share(ours, args.seq_length)
            print(
                f"{rows:>9} {strategy:>10} {trl_seconds:>8.2f} {best:>8.3f} "
                f"{trl_seconds / best:>6.1f}x {trl_fill:>9.2%} {our_fill:>9.2%}"
            )
        if "bfd" in STRATEGIES:
            seconds, whole = time_once(
                functools.partial(pack_dataset, dataset, args.seq_length, "bfd", whole_dataset=True)
            )
            print(
                f"{rows:>9} {'bfd whole':>10} {'':>8} {seconds:>8.3f} {'':>7} {'':>9} "
                f"{filled_share(whole, args.seq_length):>9.2%}"
            )


if __name__ == "__main__":
    main()
