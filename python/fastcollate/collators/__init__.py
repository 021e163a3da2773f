"""The drop-ins for transformers' collators and `tokenizer.pad()`, one module each, on the Rust
core: rows (or an `ArrowBatch`) in, padded numpy arrays or torch tensors out."""

from .base import DataCollatorMixin
from .default import (
    DefaultDataCollator,
    default_data_collator,
    numpy_default_data_collator,
    torch_default_data_collator,
)
from .flattening import DataCollatorWithFlattening
from .language_modeling import DataCollatorForLanguageModeling
from .multiple_choice import DataCollatorForMultipleChoice
from .padding import DataCollatorWithPadding
from .seq2seq import DataCollatorForSeq2Seq
from .speech import DataCollatorCTCWithPadding, DataCollatorSpeechSeq2SeqWithPadding
from .token_classification import DataCollatorForTokenClassification
from .tokenizer_pad import pad

__all__ = [
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
]
