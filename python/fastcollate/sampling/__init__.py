"""Which rows go into which batch: length grouping (`get_length_grouped_indices`, the
length-grouped samplers), token-budget packing (`PackedBatchSampler`) and `batch_rebalance`
(`BatchRebalanceSampler`), all on the Rust core, with the lengths read from Arrow.

The samplers that subclass torch's `Sampler` need torch; they are imported from their modules
(`sampling.samplers`, `sampling.rebalance`) so that this package loads without it."""

from .grouping import get_length_grouped_indices
from .lengths import sequence_lengths
from .packing import PackedBatchSampler

__all__ = ["get_length_grouped_indices", "sequence_lengths", "PackedBatchSampler", "PackedStream",
           "LengthGroupedStream"]


def __getattr__(name):
    # The streams are torch IterableDatasets: torch loads only when one is asked for.
    if name == "PackedStream":
        from .packed_stream import PackedStream

        return PackedStream
    if name == "LengthGroupedStream":
        from .length_grouped_stream import LengthGroupedStream

        return LengthGroupedStream
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
