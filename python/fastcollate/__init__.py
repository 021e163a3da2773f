"""fastcollate: drop-in, Rust-fast replacements for transformers' data collators and padding."""

from ._collators import DataCollatorWithPadding, DefaultDataCollator, default_data_collator
from ._family import (
    DataCollatorForLanguageModeling,
    DataCollatorForSeq2Seq,
    DataCollatorForTokenClassification,
    DataCollatorWithFlattening,
)
from ._native import __version__, build_profile
from ._padding import pad

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
]
