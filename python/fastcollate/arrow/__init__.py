"""Collating straight from a `datasets.Dataset`'s Arrow storage: `ArrowBatches` (a map-style
dataset whose batch requests stay in Arrow) and the `ArrowBatch` it hands the collators; and
`collate_arrow` for record batches and tables from anywhere else (Parquet, streaming)."""

from .batches import ArrowBatch, ArrowBatches
from .record_batches import collate_arrow

__all__ = ["ArrowBatch", "ArrowBatches", "collate_arrow"]
