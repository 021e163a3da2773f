"""batch_rebalance and packing, fastcollate against transformers, in one process (the targets of
issue 12). Release builds only; every figure is one run (the samplers are deterministic).

- Trainer start-up with train_sampling_strategy="batch_rebalance" over a shuffled 200k-row
  `datasets.Dataset` (an `input_ids` list column built from Arrow offsets): the time from
  `get_train_dataloader()` to the first batch, for transformers.Trainer (lengths by decoding
  every row) and fastcollate.Trainer (lengths from Arrow offsets, batches collated from Arrow).
  Both with their own `DataCollatorWithFlattening` and a tiny Llama built from a config.
- One epoch of `BatchRebalanceSampler` (one rank's iterator) over 1M IMDB-like lengths, both
  implementations, outputs compared.
- `PackedBatchSampler`: token efficiency on 200k IMDB-like lengths at max_tokens 8192, and the
  time to pack 1M lengths (IMDB-like and chat-like).

    python benches/bench_sampling.py [--rows 200000] [--epoch-rows 1000000]
"""

from __future__ import annotations

import argparse
import os
import platform

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import datasets  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import trainer_pt_utils  # noqa: E402

import fastcollate  # noqa: E402
from fastcollate.bench.timing import time_once as timed  # noqa: E402
from fastcollate.bench.workload import chat_like_lengths, imdb_like_lengths  # noqa: E402

PER_DEVICE_BATCH, GRAD_ACCUM, WORLD_SIZE = 16, 4, 8


def arrow_dataset(lengths: np.ndarray) -> datasets.Dataset:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = pa.array(np.ones(int(offsets[-1]), dtype=np.int32))
    column = pa.LargeListArray.from_arrays(pa.array(offsets), values)
    table = datasets.table.InMemoryTable(pa.table({"input_ids": column}))
    # A fixed fingerprint: otherwise datasets hashes the whole table.
    dataset = datasets.Dataset(table, fingerprint=f"bench-sampling-{len(lengths)}")
    return dataset.shuffle(seed=0, keep_in_memory=True)


def tiny_model() -> transformers.PreTrainedModel:
    config = transformers.LlamaConfig(
        vocab_size=64,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
    )
    return transformers.LlamaForCausalLM(config)


def loader_startup(trainer_cls, collator, dataset, output_dir: str) -> tuple[float, list]:
    args = transformers.TrainingArguments(
        output_dir=output_dir,
        per_device_train_batch_size=PER_DEVICE_BATCH,
        gradient_accumulation_steps=GRAD_ACCUM,
        train_sampling_strategy="batch_rebalance",
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
    )
    trainer = trainer_cls(
        model=tiny_model(), args=args, train_dataset=dataset, data_collator=collator
    )

    def first_batch():
        return next(iter(trainer.get_train_dataloader()))

    seconds, batch = timed(first_batch)
    return seconds, batch["input_ids"][0].tolist()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--epoch-rows", type=int, default=1_000_000)
    parser.add_argument("--output-dir", default="/tmp/fastcollate-bench-sampling")
    options = parser.parse_args()
    if fastcollate.build_profile != "release":
        raise SystemExit("fastcollate is a debug build: maturin develop --release first")
    torch.set_num_threads(1)
    print(
        f"fastcollate {fastcollate.__version__} ({fastcollate.build_profile}), transformers "
        f"{transformers.__version__}, torch {torch.__version__}, {platform.processor() or 'cpu'}"
    )

    rng = np.random.default_rng(0)
    lengths = imdb_like_lengths(rng, options.rows)
    dataset = arrow_dataset(lengths)
    theirs_s, theirs_first = loader_startup(
        transformers.Trainer,
        transformers.DataCollatorWithFlattening(),
        dataset,
        options.output_dir,
    )
    ours_s, ours_first = loader_startup(
        fastcollate.Trainer, fastcollate.DataCollatorWithFlattening(), dataset, options.output_dir
    )
    assert ours_first == theirs_first
    print(
        f"batch_rebalance loader, {options.rows:,} shuffled Arrow rows, to the first batch: "
        f"transformers {theirs_s:.2f} s, fastcollate {ours_s:.3f} s ({theirs_s / ours_s:.0f}x)"
    )

    epoch_lengths = imdb_like_lengths(np.random.default_rng(1), options.epoch_rows)
    effective = PER_DEVICE_BATCH * GRAD_ACCUM * WORLD_SIZE
    ours = fastcollate.BatchRebalanceSampler(epoch_lengths, effective, WORLD_SIZE, GRAD_ACCUM)
    ours_s, ours_batches = timed(lambda: list(ours))
    theirs = trainer_pt_utils.BatchRebalanceSampler(
        epoch_lengths.tolist(), effective, WORLD_SIZE, GRAD_ACCUM
    )
    theirs_s, theirs_batches = timed(lambda: list(theirs))
    assert ours_batches == theirs_batches
    print(
        f"BatchRebalanceSampler epoch, {options.epoch_rows:,} lengths (batch {PER_DEVICE_BATCH}, "
        f"grad_accum {GRAD_ACCUM}, {WORLD_SIZE} ranks): transformers {theirs_s:.2f} s, "
        f"fastcollate {ours_s:.3f} s ({theirs_s / ours_s:.0f}x)"
    )

    sampler = fastcollate.PackedBatchSampler(lengths, 8192)
    print(
        f"PackedBatchSampler, {options.rows:,} IMDB-like lengths at max_tokens 8192: "
        f"{sampler.token_efficiency():.4%} of the token budget used, {len(sampler):,} batches"
    )
    for name, draw in (("IMDB-like", imdb_like_lengths), ("chat-like", chat_like_lengths)):
        many = draw(np.random.default_rng(2), options.epoch_rows)
        seconds, batches = timed(lambda many=many: list(fastcollate.PackedBatchSampler(many, 8192)))
        print(
            f"PackedBatchSampler, {options.epoch_rows:,} {name} lengths packed (epoch, as lists): "
            f"{seconds:.3f} s, {len(batches):,} batches"
        )


if __name__ == "__main__":
    main()
