"""The one entry into the native module's collation for Python rows and Arrow batches alike."""

from __future__ import annotations

from typing import Any

from .. import _native
from ..arrow import ArrowBatch


def collate(features: Any, groups: list, **options: Any) -> dict:
    """`_native.collate` for rows (a list of mappings, or a mapping of lists), or its Arrow
    counterpart when `features` is an ArrowBatch: same groups, options and output."""
    if isinstance(features, ArrowBatch):
        return features.collate(groups, **options)
    return _native.collate(features, groups, **options)


def collate_rows(rows: list, groups: list, options: dict) -> dict:
    """`_native.collate` for a list of rows, with its keyword options as one prepared dict:
    for callers that settled them once for many calls."""
    return _native.collate(rows, groups, **options)
