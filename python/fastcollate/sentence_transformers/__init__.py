"""fastcollate for sentence-transformers: tokenize a training dataset once
(`pretokenize`, with sentence-transformers' own preprocessing, unpadded), then pad each batch
in Rust (`SentenceTransformerDataCollator`) into the features sentence-transformers' collator
would have tokenized; `SentenceTransformerTrainer` does both inside sentence-transformers'
trainer. Needs the `sentence-transformers` extra."""

from .collator import SentenceTransformerDataCollator
from .pretokenize import pretokenize
from .trainer import PreTokenizedTrainerMixin, SentenceTransformerTrainer

__all__ = [
    "SentenceTransformerDataCollator",
    "pretokenize",
    "PreTokenizedTrainerMixin",
    "SentenceTransformerTrainer",
]
