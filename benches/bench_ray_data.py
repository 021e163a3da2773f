"""Ray Data's `iter_torch_batches` over a local Parquet folder, per batch: `collate_fn=
fastcollate.RayCollateFn(fastcollate.DataCollatorWithPadding(tok))` against transformers'
DataCollatorWithPadding as the collate_fn on the same stream (`RayCollateFn(transformers'
collator)` hands it each Arrow batch's `to_pylist()` rows, as a NumpyBatchCollateFn that
rebuilt rows would).

The IMDB-like tokenized rows of bench_record_batches.py (lognormal lengths around 230 tokens,
capped at 512) are written as --files Parquet files and read with `ray.data.read_parquet` on a
local cluster (`ray.init(num_cpus=2)`). Timed, best of --repeat passes, the two alternating:

- whole loop: `iter_torch_batches(batch_size=B, collate_fn=...)` end to end (Ray reading the
  files, batching, the collate_fn, handing over the tensors): what a Ray training loop waits for;
- collation alone: the collate_fn on the `pyarrow.Table` batches Ray gives
  (`iter_batches(batch_format="pyarrow")`, read beforehand).

Both collate_fns give identical batches (checked on the first batches before timing). Reported:
microseconds per batch and transformers' time over fastcollate's.

    python benches/bench_ray_data.py [--rows 20000] [--batch-size 8 32] [--repeat 3]

Needs a release build (`maturin develop --release`) and Ray Data (`pip install '.[ray]'`).
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pyarrow.parquet as pq  # noqa: E402
import ray  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from bench_record_batches import tokenizer_dir, write_parquet  # noqa: E402

import fastcollate  # noqa: E402


def per_batch(batches_of, collate) -> float:
    """One pass over `batches_of(collate)`, in seconds per batch."""
    gc.collect()
    count = 0
    start = time.perf_counter()
    for _ in batches_of(collate):
        count += 1
    return (time.perf_counter() - start) / count


def check_same(collates: dict, tables: list) -> None:
    for table in tables[:5]:
        reference = dict(collates["transformers"](table))
        batch = dict(collates["fastcollate"](table))
        if list(batch) != list(reference) or any(
            batch[k].dtype != reference[k].dtype or not torch.equal(batch[k], reference[k])
            for k in reference
        ):
            raise SystemExit("fastcollate gives different batches from transformers")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--batch-size", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    if fastcollate.build_profile != "release":
        raise SystemExit(
            f"fastcollate is a {fastcollate.build_profile} build: timings would mean nothing. "
            "Build it with `maturin develop --release` (or pip install .)."
        )
    tokenizer = transformers.AutoTokenizer.from_pretrained(tokenizer_dir())
    collates = {
        "transformers": fastcollate.RayCollateFn(transformers.DataCollatorWithPadding(tokenizer)),
        "fastcollate": fastcollate.RayCollateFn(fastcollate.DataCollatorWithPadding(tokenizer)),
    }
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        with tempfile.TemporaryDirectory() as directory:
            whole = os.path.join(directory, "whole.parquet")
            lengths = write_parquet(options.rows, whole)
            table = pq.read_table(whole)
            step = -(-options.rows // options.files)
            for index in range(options.files):
                part = table.slice(index * step, step)
                pq.write_table(part, os.path.join(directory, f"part{index}.parquet"))
            os.remove(whole)
            stream = ray.data.read_parquet(directory).materialize()  # read once, kept in memory
            print(
                f"fastcollate {fastcollate.__version__} ({fastcollate.build_profile}), "
                f"ray {ray.__version__}, transformers {transformers.__version__}, "
                f"torch {torch.__version__}, Python {platform.python_version()}, "
                f"{platform.machine()}, {os.cpu_count()} CPUs"
            )
            print(
                f"Parquet: {options.rows} rows in {options.files} files, lengths mean "
                f"{lengths.mean():.0f} / max {lengths.max()}; "
                f"load average {os.getloadavg()[0]:.1f}"
            )
            print()
            header = (
                f"{'batch':>5}  {'timed':<15}  {'transformers':>12}  {'fastcollate':>12}  "
                f"{'speed-up':>8}"
            )
            print(header)
            print("-" * len(header))
            for batch_size in options.batch_size:

                def loop(collate, b=batch_size):
                    return stream.iter_torch_batches(batch_size=b, collate_fn=collate)

                tables = list(stream.iter_batches(batch_size=batch_size, batch_format="pyarrow"))

                def alone(collate, tables=tables):
                    return (collate(t) for t in tables)

                check_same(collates, tables)
                for timed, batches_of in (("whole loop", loop), ("collation alone", alone)):
                    times = {name: float("inf") for name in collates}
                    for _ in range(options.repeat):  # A/B alternating, best of each
                        for name, collate in collates.items():
                            times[name] = min(times[name], per_batch(batches_of, collate))
                    hf, ours = times["transformers"], times["fastcollate"]
                    print(
                        f"{batch_size:>5}  {timed:<15}  {hf * 1e6:>9.0f} us  "
                        f"{ours * 1e6:>9.0f} us  {hf / ours:>7.1f}x",
                        flush=True,
                    )
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
