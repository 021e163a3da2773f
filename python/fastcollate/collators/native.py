"""`collate` for Python rows and Arrow batches alike, and the collate plans a call plan holds
(`collate_plan`). Not the only way into the native module: other callers use `_native`
directly (docs/design.md, Python ↔ Rust)."""

from __future__ import annotations

from typing import Any

from .. import _native
from ..arrow import ArrowBatch


def collate(features: Any, groups: list[Any], **options: Any) -> dict[str, Any]:
    """`_native.collate` for rows (a list of mappings, or a mapping of lists), or its Arrow
    counterpart when `features` is an ArrowBatch: same groups, options and output."""
    if isinstance(features, ArrowBatch):
        return features.collate(groups, **options)
    return _native.collate(features, groups, **options)


def collate_plan(groups: list[Any], **options: Any) -> Any:
    """The `_native.CollatePlan` of `groups` and `collate`'s keyword options `float32`,
    `keep_arrays`, `keep_numpy_scalars` and `to_tensor`, for `_native.collate_planned` (which a
    `_native.PlannedCall` calls)."""
    return _native.CollatePlan(groups, **options)
