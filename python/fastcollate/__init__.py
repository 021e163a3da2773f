"""fastcollate: drop-in, Rust-fast replacements for transformers' data collators and padding.

Every public name takes the arguments of its transformers namesake, so switching is an import
change. `__version__` is the package version; `build_profile` is "release" for an optimized
build (wheels, `pip install`) and "debug" for a development build, whose timings mean nothing.
`LengthGroupedSampler`, `DistributedLengthGroupedSampler` (need torch) and `Trainer` (needs
transformers) are imported on first use.
"""

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

# Names that need torch / transformers load on first use, so `import fastcollate` stays light:
# name -> (module, the extra that installs what it needs, the modules it needs).
_LAZY = {
    "LengthGroupedSampler": ("._samplers", "torch", ("torch",)),
    "DistributedLengthGroupedSampler": ("._samplers", "torch", ("torch",)),
    "Trainer": ("._trainer", "transformers", ("torch", "transformers")),
    "BatchRebalanceSampler": ("._rebalance", "torch", ("torch",)),
    "TrainingArguments": ("._training_args", "transformers", ("torch", "transformers")),
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        from ._internal.extras import require

        module, extra, needs = _LAZY[name]
        require(f"fastcollate.{name}", extra, *needs)
        value = getattr(importlib.import_module(module, __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
