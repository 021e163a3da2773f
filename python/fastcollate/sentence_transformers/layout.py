"""The pre-tokenized layout both sides agree on: per text column `c`, the per-row sequences
`c_input_ids` (then `c_token_type_ids`, `c_attention_mask`, as the tokenizer returns them) and
the per-column values sentence-transformers' preprocessing adds to a batch (`c_modality`,
`c_prompt_length`, `c_task`), stored in every row."""

from __future__ import annotations

# What sentence-transformers' preprocessing returns per row for text, padded by the collator.
SEQUENCE_KEYS = ("input_ids", "token_type_ids", "attention_mask")
# What it returns once per batch (and the task the collator stamps), stored in every row.
BATCH_KEYS = ("modality", "prompt_length", "task")
MAIN_SUFFIX = "_input_ids"

# sentence-transformers' default label columns (`BaseDataCollator.valid_label_columns`).
DEFAULT_LABEL_COLUMNS = ("label", "labels", "score", "scores")


def text_columns(column_names: list[str]) -> list[str]:
    """The text columns of a pre-tokenized dataset, in order: the prefixes of `*_input_ids`."""
    return [name[: -len(MAIN_SUFFIX)] for name in column_names if name.endswith(MAIN_SUFFIX)]


def pretokenized_columns(column_names: list[str]) -> list[str]:
    """The columns of `column_names` that belong to a pre-tokenized text column (`c_input_ids`
    and the keys beside it), in order."""
    owned = {f"{prefix}_{key}" for prefix in text_columns(column_names)
             for key in SEQUENCE_KEYS + BATCH_KEYS}
    return [name for name in column_names if name in owned]
