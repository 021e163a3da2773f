"""fastcollate inside transformers' training stack: `patch_transformers()` (an unchanged script
builds fastcollate's objects), and `Trainer` / `TrainingArguments` (the Arrow fast path, length
grouping, packing and rebalancing under transformers' own loop), and `RayCollateFn` (Ray Data's
`iter_torch_batches` on Arrow batches). `trainer` and `training_args` need torch and
transformers, `ray_data` needs Ray, so they are imported from their modules."""

from .patch import TransformersPatch, patch_transformers, unpatch_transformers

__all__ = ["patch_transformers", "unpatch_transformers", "TransformersPatch"]
