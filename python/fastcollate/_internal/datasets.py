"""Recognising a `datasets.Dataset` without importing datasets (it is optional, and heavy)."""

from __future__ import annotations

import sys
from typing import Any


def is_datasets_dataset(value: Any) -> bool:
    """Whether `value` is a `datasets.Dataset` (False when datasets was never imported: then
    nothing can be one)."""
    datasets = sys.modules.get("datasets")
    return datasets is not None and isinstance(value, datasets.Dataset)
