"""Checks on integer options shared by the samplers and packing: a clear TypeError or
ValueError naming the option, instead of a failure deep inside."""

from __future__ import annotations

import operator
from typing import Any, cast


def checked_count(value: Any, name: str, minimum: int) -> int:
    """`value` as an int >= `minimum`; a TypeError / ValueError naming `name` otherwise (bools
    and floats are not integers here, numpy integers are)."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, not a bool")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, not {type(value).__name__}") from None
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, not {value}")
    return cast(int, value)  # an int: operator.index gave it
