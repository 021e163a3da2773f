"""TRL's SFT collator against fastcollate's, in one process, on the same batches.

The rows are what `SFTTrainer` hands its collator after dataset preparation: a chat-SFT-like
dataset (lognormal lengths around 400 tokens, capped at 2048) with `input_ids`, `labels` (the
prompt part -100) and `completion_mask`, read through `datasets` as Python lists. Cases:

- padded:       DataCollatorForLanguageModeling(pad_token_id)
- padding-free: DataCollatorForLanguageModeling(pad_token_id, padding_free=True)
- packed (bfd): rows from `trl.pack_dataset(dataset, 2048, strategy="bfd")` (`seq_lengths`),
                padding_free=True, as SFTConfig(packing=True) sets it up
- padded Arrow: fastcollate reads the batch from Arrow (`fastcollate.ArrowBatches`); TRL the
                same rows through `datasets`

Preference cases, on a preference dataset read the same way (prompts around 150 tokens,
completions around 250, lognormal; the trainers' tokenized columns):

- DPO:          trl.trainer.dpo_trainer.DataCollatorForPreference(pad_token_id), with
                ref_chosen_logps / ref_rejected_logps, and with max_length=512 (keep_end)
- reward:       trl.trainer.reward_trainer.DataCollatorForPreference(pad_token_id), margins
- KTO:          trl.trainer.kto_trainer.DataCollatorForUnpairedPreference, KL completions
- GRPO pad:     what GRPOTrainer does with generated prompt and completion token lists
                (`torch.tensor` per row, `ones_like` masks, `trl.trainer.utils.pad` x4: prompts
                left, completions right) against `fastcollate.trl.pad_with_mask` x2
- pad tensors:  `trl.trainer.utils.pad` against `fastcollate.trl.pad` on the same 1-d tensors

Each batch is checked equal (keys, values, dtypes) before timing. Reported: microseconds per
batch of the collator call alone (the rows are read beforehand, except the Arrow case, whose
fastcollate figure includes reading from Arrow), best of --repeat, and TRL's time over
fastcollate's.

Then dataset preparation: `SFTTrainer._prepare_dataset` on an already tokenized
prompt-completion dataset (`input_ids`, `completion_mask`; labels built, truncated to 1024,
rows without a label dropped) against `fastcollate.trl.prepare_tokenized_sft_dataset`, for each
of --prep-rows (TRL's run once, ours best of --repeat; the two results checked equal).

    python benches/bench_trl.py [--rows 4000] [--batch-size 8 32] [--repeat 5]
                                [--prep-rows 20000 100000]

Needs a release build (`maturin develop --release`): a debug build is refused.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import datasets  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import trl  # noqa: E402
from trl.data_utils import pack_dataset  # noqa: E402
from trl.trainer.dpo_trainer import DataCollatorForPreference as TRLPreference  # noqa: E402
from trl.trainer.kto_trainer import DataCollatorForUnpairedPreference as TRLUnpaired  # noqa: E402
from trl.trainer.reward_trainer import DataCollatorForPreference as TRLReward  # noqa: E402
from trl.trainer.sft_trainer import DataCollatorForLanguageModeling as TRLCollator  # noqa: E402
from trl.trainer.utils import pad as trl_pad  # noqa: E402

import fastcollate  # noqa: E402
import fastcollate.trl  # noqa: E402

PAD_ID = 151643  # a Qwen-style pad id: a real vocabulary's range
MAX_LENGTH = 2048


def sft_dataset(rows: int, seed: int = 0) -> datasets.Dataset:
    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.lognormal(np.log(400), 0.6, rows).astype(np.int64), 16, MAX_LENGTH)
    input_ids, labels, completion_mask = [], [], []
    for length in lengths:
        ids = rng.integers(0, 150000, length).tolist()
        prompt = int(rng.integers(4, max(5, length // 2)))
        input_ids.append(ids)
        labels.append([-100] * prompt + ids[prompt:])
        completion_mask.append([0] * prompt + [1] * (length - prompt))
    return datasets.Dataset.from_dict(
        {"input_ids": input_ids, "labels": labels, "completion_mask": completion_mask}
    )


def batches(dataset: datasets.Dataset, batch_size: int, count: int) -> list[list[dict]]:
    order = np.random.default_rng(1).permutation(len(dataset))
    return [
        dataset.__getitems__(order[i * batch_size : (i + 1) * batch_size].tolist())
        for i in range(count)
    ]


def tokenized_prompt_completion(rows: int, seed: int = 2) -> datasets.Dataset:
    """What TRL's tokenizing map leaves for a prompt-completion dataset, built in Arrow:
    int32 `input_ids` (datasets' type for the name) and an int64 `completion_mask`."""
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.lognormal(np.log(400), 0.6, rows).astype(np.int64), 16, MAX_LENGTH)
    offsets = np.zeros(rows + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    ids = rng.integers(0, 150000, int(offsets[-1])).astype(np.int32)
    prompts = rng.integers(4, np.maximum(5, lengths // 2))
    position = np.arange(int(offsets[-1])) - np.repeat(offsets[:-1], lengths)
    mask = (position >= np.repeat(prompts, lengths)).astype(np.int64)
    table = pa.table(
        {
            "input_ids": pa.ListArray.from_arrays(pa.array(offsets), pa.array(ids)),
            "completion_mask": pa.ListArray.from_arrays(pa.array(offsets), pa.array(mask)),
        }
    )
    return datasets.Dataset(table)


def trl_prepare(dataset: datasets.Dataset, max_length: int) -> datasets.Dataset:
    """TRL's own `_prepare_dataset`, called unbound: on a tokenized dataset it reads only
    `completion_only_loss` from the trainer and these `SFTConfig` fields."""
    import types

    from trl.trainer.sft_trainer import SFTTrainer

    trainer = types.SimpleNamespace(completion_only_loss=True)
    config = types.SimpleNamespace(
        dataset_num_proc=None,
        max_length=max_length,
        truncation_mode="keep_start",
        shuffle_dataset=False,
        seed=42,
        packing_strategy="bfd",
    )
    return SFTTrainer._prepare_dataset(trainer, dataset, None, config, False, None, "train")


def bench_preparation(sizes: list[int], repeat: int) -> None:
    datasets.disable_progress_bars()
    datasets.disable_caching()
    print(f"\n{'preparation':<16}{'rows':>8}{'TRL s':>10}{'fastcollate s':>15}{'ratio':>9}")
    for rows in sizes:
        dataset = tokenized_prompt_completion(rows)
        start = time.perf_counter()
        theirs = trl_prepare(dataset, 1024)
        trl_s = time.perf_counter() - start
        ours_s = float("inf")
        for _ in range(repeat):
            start = time.perf_counter()
            ours = fastcollate.trl.prepare_tokenized_sft_dataset(
                dataset, completion_only_loss=True, max_length=1024
            )
            ours_s = min(ours_s, time.perf_counter() - start)
        assert ours.features == theirs.features and ours.column_names == theirs.column_names
        assert ours.with_format("arrow")[:].equals(theirs.with_format("arrow")[:])
        print(
            f"{'labels+truncate':<16}{rows:>8}{trl_s:>10.2f}{ours_s:>15.3f}{trl_s / ours_s:>8.0f}x"
        )


def per_batch(collate, inputs: list, repeat: int) -> float:
    """Best over `repeat` passes of the mean microseconds per call."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for batch in inputs:
            collate(batch)
        best = min(best, (time.perf_counter() - start) / len(inputs))
    return best * 1e6


def preference_dataset(rows: int, seed: int = 2) -> datasets.Dataset:
    rng = np.random.default_rng(seed)

    def lengths(median: float) -> np.ndarray:
        return np.clip(rng.lognormal(np.log(median), 0.6, rows).astype(np.int64), 4, 1024)

    def tokens(counts: np.ndarray) -> list:
        return [rng.integers(0, 150000, n).tolist() for n in counts]

    columns = {
        "prompt_ids": tokens(lengths(150)),
        "chosen_ids": tokens(lengths(250)),
        "rejected_ids": tokens(lengths(250)),
        "ref_chosen_logps": rng.normal(-300, 50, rows).tolist(),
        "ref_rejected_logps": rng.normal(-320, 50, rows).tolist(),
        "margin": rng.random(rows).tolist(),
        "label": (rng.random(rows) < 0.5).tolist(),
    }
    return datasets.Dataset.from_dict(columns)


def grpo_trl(batch: list) -> tuple:
    """GRPOTrainer's padding of a batch of generated (prompt, completion) token lists."""
    prompts = [torch.tensor(row["prompt_ids"]) for row in batch]
    prompt_mask = [torch.ones_like(ids, dtype=torch.long) for ids in prompts]
    completions = [torch.tensor(row["chosen_ids"]) for row in batch]
    completion_mask = [torch.ones_like(ids, dtype=torch.long) for ids in completions]
    return (
        trl_pad(prompts, PAD_ID, "left"),
        trl_pad(prompt_mask, 0, "left"),
        trl_pad(completions, PAD_ID, "right"),
        trl_pad(completion_mask, 0, "right"),
    )


def grpo_fastcollate(batch: list) -> tuple:
    prompts = fastcollate.trl.pad_with_mask([row["prompt_ids"] for row in batch], PAD_ID, "left")
    completions = fastcollate.trl.pad_with_mask([row["chosen_ids"] for row in batch], PAD_ID)
    return (*prompts, *completions)


def preference_cases(args: argparse.Namespace) -> None:
    data = preference_dataset(args.rows)
    dpo_rows = data.select_columns(
        ["prompt_ids", "chosen_ids", "rejected_ids", "ref_chosen_logps", "ref_rejected_logps"]
    )
    kto_rows = data.rename_columns({"chosen_ids": "completion_ids"}).rename_columns(
        {"rejected_ids": "KL_completion_ids"}
    )
    truncated = {"max_length": 512, "truncation_mode": "keep_end"}
    cases = [
        ("DPO", dpo_rows, TRLPreference, fastcollate.trl.DataCollatorForPreference, {}),
        ("DPO 512 keep_end", dpo_rows, TRLPreference,
         fastcollate.trl.DataCollatorForPreference, truncated),
        ("reward", data.select_columns(["chosen_ids", "rejected_ids", "margin"]), TRLReward,
         fastcollate.trl.RewardDataCollatorForPreference, {}),
        ("KTO", kto_rows.select_columns(["prompt_ids", "completion_ids", "KL_completion_ids",
                                         "label"]), TRLUnpaired,
         fastcollate.trl.DataCollatorForUnpairedPreference, {}),
    ]  # fmt: skip
    for name, rows_data, theirs_class, ours_class, options in cases:
        theirs = theirs_class(pad_token_id=PAD_ID, **options)
        ours = ours_class(pad_token_id=PAD_ID, **options)
        for batch_size in args.batch_size:
            rows = batches(rows_data, batch_size, min(args.batches, len(rows_data) // batch_size))
            for batch in rows[:3]:
                same(ours(batch), theirs(batch))
            report(name, batch_size, per_batch(theirs, rows, args.repeat),
                   per_batch(ours, rows, args.repeat))  # fmt: skip
    for batch_size in args.batch_size:
        rows = batches(data, batch_size, min(args.batches, len(data) // batch_size))
        for batch in rows[:3]:
            for a, b in zip(grpo_fastcollate(batch), grpo_trl(batch), strict=True):
                assert a.dtype == b.dtype and torch.equal(a, b)
        report("GRPO pad x4", batch_size, per_batch(grpo_trl, rows, args.repeat),
               per_batch(grpo_fastcollate, rows, args.repeat))  # fmt: skip
    for batch_size in args.batch_size:
        rows = batches(data, batch_size, min(args.batches, len(data) // batch_size))
        tensors = [[torch.tensor(row["chosen_ids"]) for row in batch] for batch in rows]
        for batch in tensors[:3]:
            assert torch.equal(fastcollate.trl.pad(batch, PAD_ID), trl_pad(batch, PAD_ID))
        trl_us = per_batch(lambda b: trl_pad(b, PAD_ID), tensors, args.repeat)
        ours_us = per_batch(lambda b: fastcollate.trl.pad(b, PAD_ID), tensors, args.repeat)
        report("pad tensors", batch_size, trl_us, ours_us)


def report(name: str, batch_size: int, trl_us: float, ours_us: float) -> None:
    print(f"{name:<18}{batch_size:>6}{trl_us:>12.0f}{ours_us:>16.0f}{trl_us / ours_us:>8.0f}x")


def same(ours: dict, theirs: dict) -> None:
    assert list(ours) == list(theirs), (list(ours), list(theirs))
    for key, value in theirs.items():
        if isinstance(value, torch.Tensor):
            assert ours[key].dtype == value.dtype and torch.equal(ours[key], value), key
        else:
            assert ours[key] == value, key


def sft_cases(args: argparse.Namespace) -> None:
    dataset = sft_dataset(args.rows)
    packed = pack_dataset(dataset.select_columns(["input_ids", "labels"]), MAX_LENGTH, "bfd")
    cases = [
        ("padded", dataset, {}, False),
        ("padding-free", dataset, {"padding_free": True}, False),
        ("packed (bfd)", packed, {"padding_free": True}, False),
        ("padded, Arrow", dataset, {}, True),
    ]
    for name, data, options, arrow in cases:
        theirs = TRLCollator(pad_token_id=PAD_ID, **options)
        ours = fastcollate.trl.DataCollatorForLanguageModeling(pad_token_id=PAD_ID, **options)
        wrapper = fastcollate.ArrowBatches(data) if arrow else None
        for batch_size in args.batch_size:
            count = min(args.batches, len(data) // batch_size)
            rows = batches(data, batch_size, count)
            inputs = rows
            if arrow:
                order = np.random.default_rng(1).permutation(len(data))
                inputs = [
                    wrapper.__getitems__(order[i * batch_size : (i + 1) * batch_size].tolist())
                    for i in range(count)
                ]
            for ours_input, rows_input in zip(inputs[:3], rows[:3], strict=True):
                same(ours(ours_input), theirs(rows_input))
            trl_us = per_batch(theirs, rows, args.repeat)
            ours_us = per_batch(ours, inputs, args.repeat)
            report(name, batch_size, trl_us, ours_us)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=4000)
    parser.add_argument("--batch-size", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--batches", type=int, default=20, help="batches timed per pass")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--prep-rows", type=int, nargs="*", default=[20000, 100000])
    parser.add_argument(
        "--only-preference", action="store_true", help="skip the SFT cases (quicker)"
    )
    args = parser.parse_args()
    if fastcollate.build_profile != "release":
        sys.exit(
            f"fastcollate is a {fastcollate.build_profile} build: timings would mean nothing. "
            "Build it with `maturin develop --release` (or pip install .)."
        )
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    print(
        f"fastcollate {fastcollate.__version__} ({fastcollate.build_profile}), trl "
        f"{trl.__version__}, torch {torch.__version__}, Python {platform.python_version()}, "
        f"{platform.machine()}"
    )
    print(f"{'case':<18}{'batch':>6}{'TRL µs':>12}{'fastcollate µs':>16}{'ratio':>9}")
    if not args.only_preference:
        sft_cases(args)
    preference_cases(args)
    if args.prep_rows and not args.only_preference:
        bench_preparation(args.prep_rows, args.repeat)


if __name__ == "__main__":
    main()
