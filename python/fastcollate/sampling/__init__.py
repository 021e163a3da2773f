"""Which rows go into which batch: length grouping (`get_length_grouped_indices`, the
length-grouped samplers), token-budget packing (`PackedBatchSampler`) and `batch_rebalance`
(`BatchRebalanceSampler`), all on the Rust core, with the lengths read from Arrow.

The samplers that subclass torch's `Sampler` need torch; they are imported from their modules
(`sampling.samplers`, `sampling.rebalance`) so that this package loads without it."""

from .._internal.lazy import lazy_exports
from .grouping import get_length_grouped_indices
from .lengths import sequence_lengths
from .packing import PackedBatchSampler

__all__ = ["get_length_grouped_indices", "sequence_lengths", "PackedBatchSampler", "PackedStream",
           "LengthGroupedStream"]


# The streams are torch IterableDatasets: torch loads only when one is asked for.
_LAZY = {
    "PackedStream": (".packed_stream", "torch", ("torch",)),
    "LengthGroupedStream": (".length_grouped_stream", "torch", ("torch",)),
}
__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)
