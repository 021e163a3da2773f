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


def check_no_later_keys(rows: Sequence[Any]) -> None:
    """Raises for a key that a later row holds and the first row lacks: a batch is collated
    under its first row's keys (as transformers collates it), so such a key would be left out,
    silently. Only rows with another number of keys are looked into (a row with as many keys
    and one of them different lacks one of the first row's, which its reader reports)."""
    if not rows:
        return
    first = rows[0]
    try:
        count = len(first)
    except TypeError:
        return  # not a mapping: the reader reports it
    for index, row in enumerate(rows):
        try:
            if len(row) == count:
                continue
            keys = list(row.keys())
        except (TypeError, AttributeError):
            continue
        for key in keys:
            if key not in first:
                raise ValueError(
                    f"row {index} has a key '{key}' that the first row lacks; a batch's keys "
                    f"are its first row's, so '{key}' would be left out: give every row of a "
                    "batch the same keys"
                )
