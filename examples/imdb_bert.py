"""Fine-tune BERT on IMDB sentiment with `fastcollate.Trainer`: the classic recipe, with batches
padded by fastcollate straight from Arrow and grouped by length.

    python examples/imdb_bert.py                                  # bert-base-uncased on IMDB
    python examples/imdb_bert.py --tiny --model path/to/model     # offline: synthetic reviews

`--tiny` trains on a few synthetic reviews instead of downloading IMDB (the tests use it with
the bundled MiniLM model); `--model` takes a hub name or a local folder."""

from __future__ import annotations

import argparse

import datasets
import numpy as np
from transformers import AutoModelForSequenceClassification, AutoTokenizer

import fastcollate


def tiny_imdb(rows: int = 64) -> datasets.DatasetDict:
    """IMDB's columns (`text`, `label`), with short made-up reviews."""
    good = ["a moving film", "loved every minute", "great acting and a fine score"]
    bad = ["dull and far too long", "the plot makes no sense", "i walked out"]

    def split(offset: int) -> datasets.Dataset:
        labels = [(i + offset) % 2 for i in range(rows)]
        texts = [
            (good if y else bad)[i % 3] + " " + "really " * (i % 7) for i, y in enumerate(labels)
        ]
        return datasets.Dataset.from_dict({"text": texts, "label": labels})

    return datasets.DatasetDict({"train": split(0), "test": split(1)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="bert-base-uncased")
    parser.add_argument("--tiny", action="store_true", help="synthetic reviews, no download")
    parser.add_argument("--max-steps", type=int, default=-1, help="stop early (default: 1 epoch)")
    parser.add_argument("--output-dir", default="imdb-bert")
    options = parser.parse_args()

    imdb = tiny_imdb() if options.tiny else datasets.load_dataset("imdb")
    tokenizer = AutoTokenizer.from_pretrained(options.model)
    imdb = imdb.map(
        lambda batch: tokenizer(batch["text"], truncation=True, max_length=512),
        batched=True,
        remove_columns=["text"],
    )
    model = AutoModelForSequenceClassification.from_pretrained(options.model, num_labels=2)

    def accuracy(prediction) -> dict[str, float]:
        return {
            "accuracy": float(
                (np.argmax(prediction.predictions, -1) == prediction.label_ids).mean()
            )
        }

    args = fastcollate.TrainingArguments(
        output_dir=options.output_dir,
        per_device_train_batch_size=8 if options.tiny else 32,
        per_device_eval_batch_size=8 if options.tiny else 64,
        learning_rate=2e-5,
        num_train_epochs=1,
        max_steps=options.max_steps,
        # batches of similar lengths: lengths read from Arrow and grouped in Rust
        train_sampling_strategy="group_by_length",
        eval_strategy="no",
        save_strategy="no",
        logging_steps=10,
        report_to="none",
    )
    # fastcollate's DataCollatorWithPadding is the default collator: no data_collator= needed
    trainer = fastcollate.Trainer(
        model=model,
        args=args,
        train_dataset=imdb["train"],
        eval_dataset=imdb["test"],
        processing_class=tokenizer,
        compute_metrics=accuracy,
    )
    trainer.train()
    print("eval", trainer.evaluate())


if __name__ == "__main__":
    main()
