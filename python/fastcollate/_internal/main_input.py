"""What kind the main input (`model_input_names[0]`, the token ids) of a batch is: Python lists,
numpy arrays or torch tensors. tokenizer.pad decides its default output and how it converts the
other keys from that kind; every padding entry point asks here."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

import numpy as np

from .. import _native
from .tensors import is_torch_tensor

# `usual_main_input_kind(value)`: the kind of row 0's main input `value` in the usual batches,
# from that value alone: a list starting with an int (None: Python lists), a numpy array ("np")
# or a torch tensor ("pt"), exactly those classes (torch's subclasses too); `UNUSUAL` for
# anything else, which `main_input_kind` settles from the other rows. Native: the rule the
# planned call of DataCollatorWithPadding takes its rows by (`_native.PlannedCall`).
usual_main_input_kind = _native.usual_main_input_kind

# `usual_main_input_kind`'s answer for a value it does not settle alone.
UNUSUAL: Final = "unusual"


def main_input_kind(main_values: Sequence[Any] | MainValues) -> str | None:
    """tokenizer.pad's rule for the main input's kind ("np", "pt", or None for Python values),
    given each row's main input (`MainValues` reads them from rows on demand): the first row's
    value decides, or, when it is a list, the first element of the first non-empty row."""
    try:
        first = main_values[0]
        kind = usual_main_input_kind(first)
        if kind != UNUSUAL:
            return kind
        if isinstance(first, (list, tuple)):
            for item in main_values:
                if len(item):
                    first = item[0]
                    break
    except (TypeError, IndexError, KeyError):
        return None  # the native module reports what is wrong with the rows
    if isinstance(first, np.ndarray):
        return "np"
    if is_torch_tensor(first):
        return "pt"
    return None


class MainValues:
    """The main input of each row, read on demand (`main_input_kind` usually needs only
    row 0)."""

    def __init__(self, rows: Sequence[Any], main: str):
        self.rows, self.main = rows, main

    def __getitem__(self, index: int) -> Any:
        return self.rows[index][self.main]

    def __iter__(self) -> Iterator[Any]:
        for row in self.rows:
            yield row[self.main] if isinstance(row, Mapping) else []


def is_single_example(main_value: Any) -> bool:
    """Whether a mapping whose main input is `main_value` is one example (a flat sequence of
    token ids), which tokenizer.pad pads as a batch of one, not a mapping of rows."""
    if isinstance(main_value, np.ndarray) or is_torch_tensor(main_value):
        return bool(main_value.ndim == 1)
    if isinstance(main_value, (list, tuple)):
        for item in main_value:
            if isinstance(item, (list, tuple)):
                if len(item):
                    return False
                continue
            if isinstance(item, np.ndarray) or is_torch_tensor(item):
                return bool(item.ndim == 0)
            return True
    return False
