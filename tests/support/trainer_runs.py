"""The text rows and TrainingArguments of the Trainer fine-tune tests."""

from __future__ import annotations

from transformers import TrainingArguments

WORDS = "the quick brown fox jumps over a lazy dog while seven small birds sing loudly".split()


def sentence(i: int) -> str:
    # Lengths from 2 to 14 words, in an order unrelated to the index.
    n = 2 + (i * 7) % 13
    return " ".join(WORDS[(i + k) % len(WORDS)] for k in range(n))


def training_args(tmp_path, strategy: str, **overrides) -> TrainingArguments:
    settings = dict(
        output_dir=str(tmp_path),
        per_device_train_batch_size=4,
        per_device_eval_batch_size=4,
        max_steps=4,
        logging_steps=1,
        learning_rate=5e-4,
        seed=0,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        disable_tqdm=True,
        train_sampling_strategy=strategy,
    )
    settings.update(overrides)
    return TrainingArguments(**settings)
