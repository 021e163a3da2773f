"""`SentenceTransformerDataCollator`: batches of a pre-tokenized dataset padded into the
features sentence-transformers' own collator produces by tokenizing the text per batch."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._internal.tensors import torch_module
from .._internal.worker_handover import hands_over
from ..collators import pad
from .layout import (
    BATCH_KEYS,
    DEFAULT_LABEL_COLUMNS,
    SEQUENCE_KEYS,
    pretokenized_columns,
    text_columns,
)


@dataclass
class SentenceTransformerDataCollator:
    """Takes rows of a dataset made by `fastcollate.sentence_transformers.pretokenize` and
    returns what `sentence_transformers.SentenceTransformerDataCollator` returns for the same
    rows of text: `dataset_name` (when the rows have one), `label` (the first of
    `valid_label_columns` found, as a tensor), then per text column `c` its padded
    `c_input_ids`, `c_token_type_ids`, `c_attention_mask` (padded by `tokenizer`'s pad token on
    its padding side, as `tokenizer(..., padding=True, return_tensors="pt")` does) and
    `c_modality`, `c_prompt_length` and `c_task` where the column has them."""

    tokenizer: Any
    valid_label_columns: list[str] = field(default_factory=lambda: list(DEFAULT_LABEL_COLUMNS))

    @hands_over
    def __call__(self, features: list[dict[str, Any]]) -> dict[str, Any]:
        if not features:
            return {}
        first = features[0]
        columns = list(first.keys())
        batch: dict[str, Any] = {}
        if "dataset_name" in columns:
            columns.remove("dataset_name")
            batch["dataset_name"] = first["dataset_name"]
        label = next((name for name in self.valid_label_columns if name in columns), None)
        known = set(pretokenized_columns(columns))
        raw = [name for name in columns if name != label and name not in known]
        if raw and known:
            raise ValueError(
                f"column '{raw[0]}' is not pre-tokenized (sentence-transformers' collator "
                "would tokenize it as text): pre-tokenize the dataset again with "
                "fastcollate.sentence_transformers.pretokenize, which tokenizes the raw "
                "columns beside the pre-tokenized ones"
            )
        for label_column in self.valid_label_columns:
            if label_column in columns:
                torch = torch_module()
                labels = [row[label_column] for row in features]
                batch["label"] = (
                    torch.stack(labels) if isinstance(labels[0], torch.Tensor)
                    else torch.tensor(labels)
                )
                break
        prefixes = text_columns(columns)
        if not prefixes:
            raise ValueError(
                "the rows hold no pre-tokenized text column (a '<column>_input_ids' key): "
                "prepare the dataset with fastcollate.sentence_transformers.pretokenize"
            )
        for prefix in prefixes:
            sequences = [f"{prefix}_{key}" for key in SEQUENCE_KEYS if f"{prefix}_{key}" in first]
            names = [key[len(prefix) + 1:] for key in sequences]
            rows = [dict(zip(names, [row[key] for key in sequences], strict=True))
                    for row in features]
            padded = pad(rows, self.tokenizer, padding=True, return_tensors="pt",
                         return_attention_mask="attention_mask" in names)
            for name in names:
                batch[f"{prefix}_{name}"] = padded[name]
            for key in BATCH_KEYS:
                if f"{prefix}_{key}" in first:
                    batch[f"{prefix}_{key}"] = first[f"{prefix}_{key}"]
        return batch
