"""fastcollate inside transformers' training stack: `patch_transformers()` (an unchanged script
builds fastcollate's objects), and `Trainer` / `TrainingArguments` (the Arrow fast path, length
grouping, packing and rebalancing under transformers' own loop). `trainer` and
`training_args` need torch and transformers, so they are imported from their modules."""

from .patch import TransformersPatch, patch_transformers, unpatch_transformers

__all__ = ["patch_transformers", "unpatch_transformers", "TransformersPatch"]
