"""Drop-in for transformers' DataCollatorForMultipleChoice, on the Rust core."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import _native
from .._internal.rows import check_no_later_keys
from .._internal.tensors import torch_module
from .base import TokenCollatorCalls, framework
from .default import holds_tensor_rows
from .padding_options import PadSettings, check_padding_options, check_tokenizer
from .tokenizer_pad import pad


def _choices(examples: list[Any], label_name: str, main_input: str) -> tuple[dict[str, Any], int]:
    """The examples' choices laid end to end, key by key ({key: [example 0 choice 0, example 0
    choice 1, ..., example 1 choice 0, ...]}), and the number of choices per example (row 0's,
    which every row must have)."""
    try:
        num_choices = len(examples[0][main_input])
    except TypeError:
        raise TypeError(
            f"'{main_input}' in row 0 must hold one sequence per choice, not a "
            f"{type(examples[0][main_input]).__name__}"
        ) from None
    columns: dict[str, list[Any]] = {}
    for key in examples[0]:
        if key == label_name:
            continue
        flat: list[Any] = []
        for row, example in enumerate(examples):
            if not isinstance(example, Mapping):
                raise TypeError(
                    f"row {row} is a {type(example).__name__}, not a mapping of feature names "
                    "to values"
                )
            if key not in example:
                raise ValueError(
                    f"row {row} has no key '{key}', which the first row has; every row of a "
                    "batch needs the same keys"
                )
            value = example[key]
            try:
                count = len(value)
            except TypeError:
                raise TypeError(
                    f"'{key}' in row {row} must hold one sequence per choice, not a "
                    f"{type(value).__name__}"
                ) from None
            if count != num_choices:
                raise ValueError(
                    f"'{key}' in row {row} holds {count} choices but row 0 has {num_choices}; "
                    "every example needs the same number of choices"
                )
            flat.extend(value)
        columns[key] = flat
    return columns, num_choices


@dataclass
class DataCollatorForMultipleChoice(TokenCollatorCalls):
    """Same fields and output as `transformers.DataCollatorForMultipleChoice`: the choices of
    every example are padded together with the tokenizer's settings and reshaped to
    `(batch, num_choices, length)`; `label` / `labels` become an int64 `labels` of one value (or
    one row) per example.

    Unlike transformers, an example with a different number of choices than the first raises a
    ValueError naming the row (transformers drops the extra choices or fails with an
    IndexError), a batch without labels gives no `labels` (transformers raises a KeyError), and
    return_tensors="np" works (transformers has no numpy path for this collator)."""

    tokenizer: Any
    padding: bool | str = True
    max_length: int | None = None
    pad_to_multiple_of: int | None = None
    return_tensors: str = "pt"

    def __post_init__(self) -> None:
        # Bad options raise here, by the rules each call applies (in its order), not at the
        # first batch.
        framework(self.return_tensors)
        check_tokenizer(self.tokenizer, "DataCollatorForMultipleChoice")
        check_padding_options(self.padding, self.max_length, self.pad_to_multiple_of)

    def _collate(self, examples: Any, framework: str) -> dict[str, Any]:
        if isinstance(examples, Mapping) or isinstance(examples, (str, bytes)):
            raise TypeError("a collator takes a list of rows (mappings of feature names to values)")
        examples = list(examples)
        if not examples:
            raise ValueError("cannot collate an empty batch: no rows were given")
        if not isinstance(examples[0], Mapping):
            raise TypeError(
                f"row 0 is a {type(examples[0]).__name__}, not a mapping of feature names to "
                "values"
            )
        check_tokenizer(self.tokenizer, "DataCollatorForMultipleChoice")
        check_no_later_keys(examples)  # keys are the first example's, as in transformers
        main_input = PadSettings.resolve(self.tokenizer).main_input
        if main_input not in examples[0]:
            raise ValueError(f"row 0 has no '{main_input}'; each example needs its choices")
        label_name = "label" if "label" in examples[0] else "labels"
        columns, num_choices = _choices(examples, label_name, main_input)
        if num_choices == 0:
            raise ValueError(f"'{main_input}' in row 0 holds no choices")
        padded = pad(
            columns,
            self.tokenizer,
            padding=self.padding,
            max_length=self.max_length,
            pad_to_multiple_of=self.pad_to_multiple_of,
            return_tensors=framework,
        )
        batch_size = len(examples)
        batch = {key: value.reshape(batch_size, num_choices, -1) for key, value in padded.items()}
        if label_name in examples[0]:
            batch["labels"] = _labels(examples, label_name, framework)
        return batch


def _labels(examples: list[Any], label_name: str, framework: str) -> Any:
    """`torch.tensor(labels, dtype=torch.int64)` (floats truncate, NaN raises), or its numpy
    twin."""
    values = []
    for row, example in enumerate(examples):
        if label_name not in example:
            raise ValueError(f"row {row} has no '{label_name}', which the first row has")
        values.append(example[label_name])
    if framework == "pt" and holds_tensor_rows(values):
        torch = torch_module()
        return torch.tensor(values, dtype=torch.int64)
    native = _native.collate({label_name: values}, [], float32=False, dtypes={label_name: "int64"})
    labels = native[label_name]
    if isinstance(labels, list):
        raise TypeError(f"'{label_name}' holds values that are not numbers")
    return torch_module().from_numpy(labels) if framework == "pt" else labels
