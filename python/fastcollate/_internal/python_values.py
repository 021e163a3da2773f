"""What `tokenizer.pad` makes of one key's values when the main input is numpy arrays or torch
tensors: it turns them into Python values first (transformers' `to_py_obj`), except that a
key whose values are all numbers (Python ints, floats, or numpy scalars) is left as it is, so
`torch.tensor` / `np.asarray` later keep the numpy scalars' dtype."""

from __future__ import annotations

from collections import UserDict
from typing import Any

import numpy as np

from .tensors import is_torch_tensor

# What a key's values may all be for tokenizer.pad to leave them unconverted (a Python bool
# is an int; `np.bool_` is not an `np.number`, nor a 0-d array).
_NUMBERS = (int, float, np.number)


def as_python_values(values: list[Any]) -> list[Any]:
    """One key's values (one per row) as tokenizer.pad converts them: unchanged when every one
    is a number, else each one through `as_python_value`."""
    if all(isinstance(value, _NUMBERS) for value in values):
        return values
    return [as_python_value(value) for value in values]


def as_python_value(value: Any) -> Any:
    """One value as transformers' `to_py_obj` gives it: arrays, tensors and numpy numbers as
    Python lists / numbers, sequences and mappings converted item by item (a sequence of
    numbers only copied into a list), anything else (a Python number, `np.float64`, which is
    a float, an `np.bool_`, a string, None) as it is."""
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, (dict, UserDict)):
        return {key: as_python_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        if all(isinstance(item, _NUMBERS) for item in value):
            return list(value)
        return [as_python_value(item) for item in value]
    if isinstance(value, (np.ndarray, np.number)) or is_torch_tensor(value):
        return value.tolist()
    return value
