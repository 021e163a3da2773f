"""`patch_transformers()`: one opt-in call that makes existing transformers scripts use
fastcollate's collators, samplers and grouping, with an undo."""

from __future__ import annotations

from typing import Any

from .. import collators, sampling
from .._internal.extras import require
from .._internal.patching import Patch, original, restore
from .._internal.versions import warn_if_untested
from ..collators import DataCollatorWithPadding
from ..collators.feature_extraction import feature_extractor_of

# Where transformers binds each name that fastcollate replaces. `transformers.trainer` imports
# some of them by value, so patching `transformers.data.data_collator` alone would not reach
# the Trainer.
_COLLATOR_MODULES = ("transformers", "transformers.data", "transformers.data.data_collator")
_TARGETS: dict[str, tuple[str, ...]] = {
    "DataCollatorWithPadding": _COLLATOR_MODULES,
    "DefaultDataCollator": _COLLATOR_MODULES,
    "default_data_collator": (*_COLLATOR_MODULES, "transformers.trainer"),
    "DataCollatorForTokenClassification": _COLLATOR_MODULES,
    "DataCollatorForSeq2Seq": _COLLATOR_MODULES,
    "DataCollatorWithFlattening": _COLLATOR_MODULES,
    "DataCollatorForLanguageModeling": _COLLATOR_MODULES,
    "DataCollatorForMultipleChoice": _COLLATOR_MODULES,
    "LengthGroupedSampler": ("transformers.trainer_pt_utils", "transformers.trainer"),
    "DistributedLengthGroupedSampler": ("transformers.trainer_pt_utils",),
    "get_length_grouped_indices": ("transformers.trainer_pt_utils",),
    "BatchRebalanceSampler": ("transformers.trainer_pt_utils", "transformers.trainer"),
}

def _padding_collator_for_trainer(processing_class: Any, *args: Any, **kwargs: Any) -> Any:
    """What `transformers.trainer` calls as `DataCollatorWithPadding(processing_class)`:
    fastcollate's for a tokenizer and a speech feature extractor (or a processor padding
    through one), transformers' for other processing classes."""
    from transformers import PreTrainedTokenizerBase

    if isinstance(processing_class, PreTrainedTokenizerBase) or feature_extractor_of(
        processing_class
    ) is not None:
        return DataCollatorWithPadding(processing_class, *args, **kwargs)
    cls = original("transformers.data.data_collator", "DataCollatorWithPadding")
    return cls(processing_class, *args, **kwargs)


def _fastcollate_objects() -> dict[str, Any]:
    """fastcollate's object for each name in `_TARGETS` (the samplers need torch, which
    `patch_transformers()` has checked for)."""
    from ..sampling.rebalance import BatchRebalanceSampler
    from ..sampling.samplers import DistributedLengthGroupedSampler, LengthGroupedSampler

    objects = {name: getattr(collators, name) for name in collators.__all__ if name != "pad"}
    objects.update(
        LengthGroupedSampler=LengthGroupedSampler,
        DistributedLengthGroupedSampler=DistributedLengthGroupedSampler,
        get_length_grouped_indices=sampling.get_length_grouped_indices,
        BatchRebalanceSampler=BatchRebalanceSampler,
    )
    return objects


def _replacements() -> dict[tuple[str, str], Any]:
    objects = _fastcollate_objects()
    found: dict[tuple[str, str], Any] = {}
    for name, module_names in _TARGETS.items():
        for module_name in module_names:
            found[(module_name, name)] = objects[name]
    if ("transformers.data.data_collator", "DataCollatorWithPadding") in found:
        found[("transformers.trainer", "DataCollatorWithPadding")] = _padding_collator_for_trainer
    return found


class TransformersPatch(Patch):
    """Returned by `patch_transformers()`: `undo()` ends this call's patch (transformers'
    objects come back once no other `patch_transformers()` handle holds them), and using it as
    a context manager undoes it on exit."""

    owner = "transformers"


def patch_transformers(*, tokenizer_pad: bool = False) -> TransformersPatch:
    """Makes transformers build fastcollate's objects: its collators (in `transformers`,
    `transformers.data`, `transformers.data.data_collator` and the Trainer's defaults) and its
    `LengthGroupedSampler`, `DistributedLengthGroupedSampler`, `get_length_grouped_indices` and
    `BatchRebalanceSampler` (in `transformers.trainer_pt_utils` and `transformers.trainer`).
    Code that imported a name (`from transformers import X`) before the call keeps the object it
    imported. Calls nest: each returns its own handle, and transformers' objects come back
    when the last handle is undone (or at `unpatch_transformers()`). Patching and undoing are
    thread-safe. Warns once (`fastcollate.UntestedVersionWarning`) when the installed
    transformers is not a release fastcollate is tested against (docs/compatibility.md).

    `tokenizer_pad=True` also replaces `PreTrainedTokenizerBase.pad`, so `tokenizer.pad(...)`
    in custom collators goes through `fastcollate.pad` for the batches it pads exactly as
    transformers does (lists or numpy / torch rows of token ids, "np" / "pt" output, every
    padding option) and through transformers' own method for anything else. It is off by
    default: it replaces a method every tokenizer has, not a name a script imports.

    Undo with the returned handle's `undo()`, `with fastcollate.patch_transformers(): ...`,
    or `unpatch_transformers()` (every handle at once)."""
    require("fastcollate.patch_transformers()", "transformers", "torch", "transformers")
    warn_if_untested("transformers", "fastcollate.patch_transformers()")
    replacements = _replacements()
    if tokenizer_pad:
        from . import tokenizer_pad as routed

        replacements[(routed.MODULE, routed.NAME)] = routed.tokenizer_pad
    return TransformersPatch(replacements)


def unpatch_transformers() -> None:
    """Restores every object `patch_transformers()` replaced, whatever handles are still
    held. Does nothing when unpatched."""
    restore("transformers")
