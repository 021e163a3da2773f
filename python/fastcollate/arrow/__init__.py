"""Collating straight from a `datasets.Dataset`'s Arrow storage: `ArrowBatches` (a map-style
dataset whose batch requests stay in Arrow) and the `ArrowBatch` it hands the collators."""

from .batches import ArrowBatch, ArrowBatches, accepts_arrow_batches

__all__ = ["ArrowBatch", "ArrowBatches", "accepts_arrow_batches"]
