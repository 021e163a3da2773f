"""`fastcollate.TrainingArguments`: transformers' TrainingArguments plus the token budget of
the "packed" sampling strategy."""

from __future__ import annotations

from dataclasses import dataclass, field

import transformers

PACKED = "packed"


@dataclass
class TrainingArguments(transformers.TrainingArguments):
    """`transformers.TrainingArguments` with one more strategy for `fastcollate.Trainer`:
    `train_sampling_strategy="packed"` trains padding-free — batches of whole sequences
    bin-packed to at most `max_tokens_per_batch` tokens per device (`PackedBatchSampler`,
    lengths read from Arrow), flattened into one row by `DataCollatorWithFlattening` (the
    default collator then) so that the model sees `position_ids` restarting at each
    sequence. `per_device_train_batch_size` does not apply: the token budget sets the batch.
    Every rank gets the same number of batches, and every sequence is used once per epoch.
    The model must take packed sequences from `position_ids` (flash attention, or sdpa /
    eager in models whose masks follow `position_ids`, e.g. Llama, Qwen2, Mistral).

    `packing_truncation=True` packs a sequence longer than the budget alone in a batch and
    cuts it to `max_tokens_per_batch` tokens (otherwise such a sequence is an error naming
    its index and length).

    On a stream (a `datasets.IterableDataset` or torch `IterableDataset`), "packed" packs
    `packing_buffer` rows at a time (`PackedStream`, default 4096) and "group_by_length" groups
    `group_by_length_buffer` rows at a time (`LengthGroupedStream`, default 4096 or one batch
    if larger). Each is an error with another strategy."""

    max_tokens_per_batch: int | None = field(
        default=None,
        metadata={
            "help": "Token budget of each packed batch per device; required for "
            "train_sampling_strategy='packed'."
        },
    )
    packing_truncation: bool = field(
        default=False,
        metadata={
            "help": "With train_sampling_strategy='packed', cut sequences longer than "
            "max_tokens_per_batch instead of raising an error."
        },
    )

    packing_buffer: int | None = field(
        default=None,
        metadata={
            "help": "With train_sampling_strategy='packed' on a stream, how many rows are read "
            "and packed at a time (default 4096)."
        },
    )
    group_by_length_buffer: int | None = field(
        default=None,
        metadata={
            "help": "With train_sampling_strategy='group_by_length' on a stream, how many rows "
            "are read and grouped by length at a time (default 4096; at least one batch)."
        },
    )

    def __post_init__(self) -> None:
        super().__post_init__()  # type: ignore[no-untyped-call]  # untyped upstream
        for name, strategy in (("packing_buffer", PACKED),
                               ("group_by_length_buffer", "group_by_length")):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive number of rows, not {value!r}")
            if self.train_sampling_strategy != strategy:
                raise ValueError(
                    f"{name} applies to train_sampling_strategy={strategy!r} only, not "
                    f"{self.train_sampling_strategy!r}"
                )
        if self.train_sampling_strategy == PACKED:
            budget = self.max_tokens_per_batch
            if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
                raise ValueError(
                    "train_sampling_strategy='packed' needs max_tokens_per_batch, a positive "
                    f"number of tokens per device batch (got {budget!r})"
                )
        elif self.max_tokens_per_batch is not None:
            raise ValueError(
                "max_tokens_per_batch applies to train_sampling_strategy='packed' only, not "
                f"{self.train_sampling_strategy!r}"
            )
