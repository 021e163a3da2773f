"""A tiny causal-LM fine-tune with train_sampling_strategy="packed", run by
tests/integrations/test_multiprocess_packing.py under torchrun (2 processes, gloo on CPU). Each rank
writes OUT/rank{N}.json: the dataset rows of every packed batch it trained on (recovered from the
flattened input_ids and position_ids), the logged losses and its sampler's batch count."""

from __future__ import annotations

import argparse

import datasets
import torch

import fastcollate
from tests.support.rank_report import finish_rank
from tests.support.tiny_models import VOCAB, tiny_model

ROWS = 90
BUDGET = 96


def counting_rows(n: int, seed: int) -> list[list[int]]:
    """Sequences counting up from a distinct start (mod VOCAB-1): learnable and all different."""
    generator = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        length = int(torch.randint(4, 30, (1,), generator=generator))
        out.append([1 + (i + k) % (VOCAB - 1) for k in range(length)] + [VOCAB - 1 - i % 7])
    return out


class RecordingTrainer(fastcollate.Trainer):
    def compute_loss(self, model, inputs, *args, **kwargs):
        self.seen.append((inputs["input_ids"][0].tolist(), inputs["position_ids"][0].tolist()))
        return super().compute_loss(model, inputs, *args, **kwargs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args()

    sequences = counting_rows(ROWS, options.seed)
    dataset = datasets.Dataset.from_dict({"input_ids": sequences})
    # Trainer sets use_cache=False (args.use_cache), as packed sequences need.
    model = tiny_model("llama", "sdpa", seed=options.seed)
    args = fastcollate.TrainingArguments(
        output_dir=options.out,
        train_sampling_strategy="packed",
        max_tokens_per_batch=BUDGET,
        num_train_epochs=2,
        logging_steps=1,
        learning_rate=3e-3,
        seed=options.seed,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        disable_tqdm=True,
    )
    trainer = RecordingTrainer(model=model, args=args, train_dataset=dataset)
    trainer.seen = []
    trainer.train()

    row_of = {tuple(s): i for i, s in enumerate(sequences)}
    batches = []
    for ids, positions in trainer.seen:
        starts = [k for k, p in enumerate(positions) if p == 0] + [len(positions)]
        rows = [row_of[tuple(ids[a:b])] for a, b in zip(starts[:-1], starts[1:], strict=True)]
        batches.append({"rows": rows, "tokens": len(ids)})
    sampler = trainer._get_train_sampler()
    report = {
        "rank": args.process_index,
        "world_size": args.world_size,
        "lengths": [len(s) for s in sequences],
        "batches": batches,
        "batches_per_epoch": len(sampler),
        "sampler": type(sampler).__name__,
        "losses": [entry["loss"] for entry in trainer.state.log_history if "loss" in entry],
    }
    finish_rank(options.out, args.process_index, report)


if __name__ == "__main__":
    main()
