"""`DataCollatorForTokenClassification`: inputs padded with the tokenizer's settings, labels
padded beside them to the same length."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._internal.tensors import batch_encoding
from .base import (
    TakesArrowBatches,
    TokenCollatorCalls,
    batch_rows,
    first_keys,
    framework,
    padded_with_labels,
)
from .padding_options import PadSettings, check_padding_options, check_tokenizer, checked_pad_id
from .tokenizer_pad import pad


@dataclass
class DataCollatorForTokenClassification(TokenCollatorCalls, TakesArrowBatches):
    """Same fields and output as `transformers.DataCollatorForTokenClassification`: pads the
    inputs with the tokenizer's settings and `labels` (or `label`) to the padded input length
    with `label_pad_token_id`, on the tokenizer's padding side.

    Unlike transformers, a label row longer than the padded inputs raises a ValueError naming
    the row (transformers leaves it unpadded: a ragged batch, or labels wider than inputs)."""

    tokenizer: Any
    padding: bool | str = True
    max_length: int | None = None
    pad_to_multiple_of: int | None = None
    label_pad_token_id: int = -100
    return_tensors: str = "pt"

    _batch_methods = ("__call__", "torch_call", "numpy_call", "_collate")

    def __post_init__(self) -> None:
        # Bad options raise here, by the rules each call applies (in its order), not at the
        # first batch.
        framework(self.return_tensors)
        check_tokenizer(self.tokenizer, "DataCollatorForTokenClassification")
        checked_pad_id("label_pad_token_id", self.label_pad_token_id)
        check_padding_options(self.padding, self.max_length, self.pad_to_multiple_of)

    def _collate(self, features: Any, return_tensors: str) -> Any:
        check_tokenizer(self.tokenizer, "DataCollatorForTokenClassification")
        settings = PadSettings.resolve(self.tokenizer)
        features = batch_rows(features, settings.main_input)
        first = first_keys(features)
        label_name = "label" if "label" in first else "labels"
        if label_name not in first:
            return pad(
                features,
                self.tokenizer,
                padding=self.padding,
                max_length=self.max_length,
                pad_to_multiple_of=self.pad_to_multiple_of,
                return_tensors=return_tensors,
            )
        batch = padded_with_labels(
            features,
            settings,
            self.padding,
            self.max_length,
            self.pad_to_multiple_of,
            return_tensors,
            label_follower=(
                label_name,
                checked_pad_id("label_pad_token_id", self.label_pad_token_id),
                False,
            ),
            dtypes={label_name: "int64"},
        )
        # transformers pads without the labels and adds them last.
        batch[label_name] = batch.pop(label_name)
        return batch_encoding(batch)
