"""Checks on a batch of rows shared by every entry point, with transformers' messages."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any


def missing_main_input(
    main_input: str, keys: Iterable[str], where: str = "the batch"
) -> ValueError:
    """The error for a batch without the main input: `where` ("row 0", "the batch") has none
    of it, among `keys`."""
    return ValueError(
        f"{where} has no key '{main_input}', the main input (model_input_names[0]), which "
        f"padding needs in every row; {where} has {list(keys)}"
    )


def first_row(rows: Sequence[Any], main_input: str, action: str) -> Mapping[str, Any]:
    """Row 0 of a list of rows, after checking the batch is not empty, row 0 is a mapping and
    it holds the main input. `action` ("pad", "collate") goes into the empty-batch message."""
    if not rows:
        raise ValueError(f"cannot {action} an empty batch: no rows were given")
    first = rows[0]
    if type(first) is not dict and not isinstance(first, Mapping):
        raise TypeError(
            f"row 0 is a {type(first).__name__}, not a mapping of feature names to values"
        )
    if main_input not in first:
        raise missing_main_input(main_input, first.keys(), "row 0")
    return first
