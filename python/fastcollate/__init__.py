"""fastcollate: drop-in, Rust-fast replacements for transformers' data collators and padding.

Every public name takes the arguments of its transformers namesake, so switching is an import
change. `__version__` is the package version; `build_profile` is "release" for an optimized
build (wheels, `pip install`) and "debug" for a development build, whose timings mean nothing.
`LengthGroupedSampler`, `DistributedLengthGroupedSampler`, `BatchRebalanceSampler`,
`PackedStream`, `LengthGroupedStream` (need torch), `Trainer`, `Seq2SeqTrainer`,
`ArrowTrainerMixin`, `TrainingArguments` (need transformers), `patch_trl`, `unpatch_trl`,
`TRLPatch` (need TRL), `RayCollateFn` (needs Ray Data) and `prepare` (needs accelerate) are
imported on first use.
"""

from ._internal.lazy import lazy_exports
from ._internal.versions import UntestedVersionWarning
from ._native import __version__, build_profile
from .arrow import ArrowBatch, ArrowBatches, collate_arrow
from .collators import (
    DataCollatorCTCWithPadding,
    DataCollatorForLanguageModeling,
    DataCollatorForMultipleChoice,
    DataCollatorForSeq2Seq,
    DataCollatorForTokenClassification,
    DataCollatorMixin,
    DataCollatorSpeechSeq2SeqWithPadding,
    DataCollatorWithFlattening,
    DataCollatorWithPadding,
    DefaultDataCollator,
    default_data_collator,
    numpy_default_data_collator,
    pad,
    torch_default_data_collator,
)
from .integrations import TransformersPatch, patch_transformers, unpatch_transformers
from .sampling import PackedBatchSampler, get_length_grouped_indices, sequence_lengths

__all__ = [
    "__version__",
    "build_profile",
    "pad",
    "DataCollatorWithPadding",
    "DefaultDataCollator",
    "default_data_collator",
    "torch_default_data_collator",
    "numpy_default_data_collator",
    "DataCollatorMixin",
    "DataCollatorForTokenClassification",
    "DataCollatorForSeq2Seq",
    "DataCollatorWithFlattening",
    "DataCollatorForLanguageModeling",
    "DataCollatorForMultipleChoice",
    "DataCollatorCTCWithPadding",
    "DataCollatorSpeechSeq2SeqWithPadding",
    "get_length_grouped_indices",
    "sequence_lengths",
    "LengthGroupedSampler",
    "DistributedLengthGroupedSampler",
    "BatchRebalanceSampler",
    "PackedBatchSampler",
    "PackedStream",
    "LengthGroupedStream",
    "Trainer",
    "Seq2SeqTrainer",
    "ArrowTrainerMixin",
    "TrainingArguments",
    "patch_transformers",
    "unpatch_transformers",
    "TransformersPatch",
    "patch_trl",
    "unpatch_trl",
    "TRLPatch",
    "UntestedVersionWarning",
    "ArrowBatches",
    "ArrowBatch",
    "collate_arrow",
    "RayCollateFn",
    "prepare",
]

# Names that need torch / transformers load on first use, so `import fastcollate` stays light:
# name -> (module, the extra that installs what it needs, the modules it needs).
_LAZY = {
    "LengthGroupedSampler": (".sampling.samplers", "torch", ("torch",)),
    "DistributedLengthGroupedSampler": (".sampling.samplers", "torch", ("torch",)),
    "BatchRebalanceSampler": (".sampling.rebalance", "torch", ("torch",)),
    "PackedStream": (".sampling.packed_stream", "torch", ("torch",)),
    "LengthGroupedStream": (".sampling.length_grouped_stream", "torch", ("torch",)),
    "Trainer": (".integrations.trainer", "transformers", ("torch", "transformers")),
    "Seq2SeqTrainer": (".integrations.trainer", "transformers", ("torch", "transformers")),
    "ArrowTrainerMixin": (".integrations.trainer", "transformers", ("torch", "transformers")),
    "TrainingArguments": (".integrations.training_args", "transformers", ("torch", "transformers")),
    "patch_trl": (".trl.patch", "trl", ("torch", "trl")),
    "unpatch_trl": (".trl.patch", "trl", ("torch", "trl")),
    "TRLPatch": (".trl.patch", "trl", ("torch", "trl")),
    "RayCollateFn": (".integrations.ray_data", "ray", ("ray.data",)),
    "prepare": (".integrations.accelerate_loader", "transformers", ("torch", "accelerate")),
}


# `dir()` and tab completion list every public name before it is loaded.
__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)
