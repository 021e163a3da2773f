"""fastcollate: drop-in, Rust-fast replacements for transformers' data collators and padding."""

from ._arrow import ArrowBatch, ArrowBatches
from ._collators import DataCollatorWithPadding, DefaultDataCollator, default_data_collator
from ._family import (
    DataCollatorForSeq2Seq,
    DataCollatorForTokenClassification,
    DataCollatorWithFlattening,
)
from ._grouping import get_length_grouped_indices, sequence_lengths
from ._language_modeling import DataCollatorForLanguageModeling
from ._multiple_choice import DataCollatorForMultipleChoice
from ._native import __version__, build_profile
from ._packing import PackedBatchSampler
from ._padding import pad
from ._patch import TransformersPatch, patch_transformers, unpatch_transformers

__all__ = [
    "__version__",
    "build_profile",
    "pad",
    "DataCollatorWithPadding",
    "DefaultDataCollator",
    "default_data_collator",
    "DataCollatorForTokenClassification",
    "DataCollatorForSeq2Seq",
    "DataCollatorWithFlattening",
    "DataCollatorForLanguageModeling",
    "DataCollatorForMultipleChoice",
    "get_length_grouped_indices",
    "sequence_lengths",
    "LengthGroupedSampler",
    "DistributedLengthGroupedSampler",
    "BatchRebalanceSampler",
    "PackedBatchSampler",
    "Trainer",
    "TrainingArguments",
    "patch_transformers",
    "unpatch_transformers",
    "TransformersPatch",
    "ArrowBatches",
    "ArrowBatch",
]

# Names that need torch / transformers load on first use, so `import fastcollate` stays light.
_LAZY = {
    "LengthGroupedSampler": "._samplers",
    "DistributedLengthGroupedSampler": "._samplers",
    "BatchRebalanceSampler": "._rebalance",
    "Trainer": "._trainer",
    "TrainingArguments": "._training_args",
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
