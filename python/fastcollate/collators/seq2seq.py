"""`DataCollatorForSeq2Seq`: inputs padded with the tokenizer's settings, labels padded as a
group of their own, `decoder_input_ids` from the model."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import _native
from .._internal.tensors import batch_encoding
from ..arrow import ArrowBatch
from .base import (
    TakesArrowBatches,
    TokenCollatorCall,
    batch_rows,
    first_keys,
    framework,
    has_nulls,
    padded_with_labels,
)
from .padding_options import (
    PadSettings,
    check_padding_options,
    check_tokenizer,
    checked_pad_id,
    clamped_multiple,
    padding_group,
    padding_strategy,
)


@dataclass
class DataCollatorForSeq2Seq(TokenCollatorCall, TakesArrowBatches):
    """Same fields and output as `transformers.DataCollatorForSeq2Seq`: pads the inputs with the
    tokenizer's settings and the labels separately with `label_pad_token_id` (to the longest
    label, or `max_length` with padding="max_length", rounded up to `pad_to_multiple_of`, on
    the tokenizer's padding side), and adds `decoder_input_ids` from
    `model.prepare_decoder_input_ids_from_labels` when a model is given.

    Unlike transformers, a label longer than `max_length` under padding="max_length" raises a
    ValueError naming the row (transformers leaves it unpadded: a ragged batch, or labels
    wider than max_length), and return_tensors must be "pt" or "np" (transformers' None gives
    lists of inputs beside a numpy labels array)."""

    tokenizer: Any
    model: Any | None = None
    padding: bool | str = True
    max_length: int | None = None
    pad_to_multiple_of: int | None = None
    label_pad_token_id: int = -100
    return_tensors: str = "pt"

    _batch_methods = ("__call__", "_collate")

    def __post_init__(self) -> None:
        # Bad options raise here, by the rules each call applies (in its order), not at the
        # first batch.
        framework(self.return_tensors)
        check_tokenizer(self.tokenizer, "DataCollatorForSeq2Seq")
        if padding_strategy(self.padding) != "do_not_pad":  # the labels are padded with it
            checked_pad_id("label_pad_token_id", self.label_pad_token_id)
        check_padding_options(self.padding, self.max_length, self.pad_to_multiple_of)

    def _collate(self, features: Any, return_tensors: str) -> Any:
        check_tokenizer(self.tokenizer, "DataCollatorForSeq2Seq")
        settings = PadSettings.resolve(self.tokenizer)
        features = batch_rows(features, settings.main_input)
        first = first_keys(features)
        label_name = "label" if "label" in first else "labels"
        arrow = isinstance(features, ArrowBatch)
        if arrow and label_name in first and has_nulls(features, label_name):
            # None labels mean "no labels" (or, mixed with labels, an error naming the row):
            # such a dataset goes to the row path, which decides.
            features, arrow = features.rows(), False
            first = features[0]
        has_labels = label_name in first
        if has_labels and not arrow and first[label_name] is None:
            # {"labels": None} in every row means no labels (a mix is an error, naming the row).
            has_labels = any(
                isinstance(row, Mapping) and row.get(label_name) is not None for row in features
            )
        # transformers pads without the label key; its padded labels then become "labels"
        # (replacing, in place, a "labels" key that the rows have beside "label").
        keys = None
        if not has_labels and label_name in first:
            keys = [k for k in first if k != label_name]
        dtypes = {label_name: "int64"} if has_labels else {}
        if label_name == "label" and "labels" in first:
            dtypes["labels"] = "int64"

        label_group: _native.PadGroup | None = None
        if has_labels:
            no_padding = self.padding is False or padding_strategy(self.padding) == "do_not_pad"
            if not no_padding:
                max_padding = (
                    padding_strategy(self.padding) == "max_length" and self.max_length is not None
                )
                label_pad_value = checked_pad_id("label_pad_token_id", self.label_pad_token_id)
                # The inputs' options are refused first, as the inputs' group refuses them.
                padding_group(settings, self.padding, self.max_length, self.pad_to_multiple_of,
                              None)
                label_group = _native.PadGroup(
                    label_name,
                    pad_value=label_pad_value,
                    strategy="max_length" if max_padding else "longest",
                    max_length=self.max_length if max_padding else None,
                    pad_to_multiple_of=clamped_multiple(self.pad_to_multiple_of),
                    left=settings.padding_side == "left",
                )
            # Without padding, labels are stacked as they are: ragged rows raise, naming the row.

        batch = padded_with_labels(
            features,
            settings,
            self.padding,
            self.max_length,
            self.pad_to_multiple_of,
            return_tensors,
            label_group=label_group,
            dtypes=dtypes,
            keys=keys,
        )
        if has_labels:
            batch["labels"] = batch.pop(label_name)
        elif "labels" not in batch:
            batch["labels"] = None
        batch = batch_encoding(batch)
        if (
            has_labels
            and self.model is not None
            and hasattr(self.model, "prepare_decoder_input_ids_from_labels")
        ):
            batch["decoder_input_ids"] = self.model.prepare_decoder_input_ids_from_labels(
                labels=batch["labels"]
            )
        return batch
