"""`patch_trl()`: one opt-in call that makes an unchanged TRL script use fastcollate's
collators, `pad`, `pack_dataset` and SFTTrainer's dataset preparation, with an undo. The same
machinery as `patch_transformers()`; each undoes only its own replacements."""

from __future__ import annotations

from typing import Any

from .._internal.extras import require
from .._internal.patching import Patch, restore
from .._internal.upstream import SFT_TRAINER_MODULE, SFT_TRAINER_PREPARE_DATASET
from .._internal.versions import warn_if_untested

# The trainers that import `trl.trainer.utils.pad` by value (each looks it up in its own
# module's globals at call time).
_PAD_USERS = (
    "trl.trainer.utils",
    "trl.trainer.sft_trainer",
    "trl.trainer.dpo_trainer",
    "trl.trainer.reward_trainer",
    "trl.trainer.kto_trainer",
    "trl.trainer.grpo_trainer",
    "trl.trainer.rloo_trainer",
)

# fastcollate.trl's name -> where TRL binds the object it replaces, under which name.
_TARGETS: dict[str, tuple[tuple[str, str], ...]] = {
    "DataCollatorForLanguageModeling": (
        ("trl.trainer.sft_trainer", "DataCollatorForLanguageModeling"),
    ),
    "DataCollatorForPreference": (("trl.trainer.dpo_trainer", "DataCollatorForPreference"),),
    # The reward trainer's collator: another class of the same name in TRL.
    "RewardDataCollatorForPreference": (
        ("trl.trainer.reward_trainer", "DataCollatorForPreference"),
    ),
    "DataCollatorForUnpairedPreference": (
        ("trl.trainer.kto_trainer", "DataCollatorForUnpairedPreference"),
    ),
    "pad": tuple((module, "pad") for module in _PAD_USERS),
    "pack_dataset": (
        ("trl", "pack_dataset"),
        ("trl.data_utils", "pack_dataset"),
        ("trl.trainer.sft_trainer", "pack_dataset"),
    ),
    # A method: labels, truncation, filtering, packing and shuffling after TRL's tokenization.
    "prepare_sft_trainer_dataset": ((SFT_TRAINER_MODULE, SFT_TRAINER_PREPARE_DATASET),),
}

# The Arrow path: the trainer classes a script imports from `trl` / `trl.trainer` after the
# patch, subclasses of TRL's whose DataLoaders hand the collator ArrowBatch handles.
_TRAINERS = ("SFTTrainer", "DPOTrainer", "RewardTrainer", "KTOTrainer")
_TARGETS.update({name: (("trl", name), ("trl.trainer", name)) for name in _TRAINERS})


def _fastcollate_objects() -> dict[str, Any]:
    """fastcollate's object for each name in `_TARGETS`."""
    from ..preparation.pack_dataset import pack_dataset
    from . import trainers
    from .language_modeling import DataCollatorForLanguageModeling
    from .padding import pad
    from .preference import (
        DataCollatorForPreference,
        DataCollatorForUnpairedPreference,
        RewardDataCollatorForPreference,
    )
    from .sft_trainer_preparation import prepare_sft_trainer_dataset

    return {
        "DataCollatorForLanguageModeling": DataCollatorForLanguageModeling,
        "DataCollatorForPreference": DataCollatorForPreference,
        "RewardDataCollatorForPreference": RewardDataCollatorForPreference,
        "DataCollatorForUnpairedPreference": DataCollatorForUnpairedPreference,
        "pad": pad,
        "pack_dataset": pack_dataset,
        "prepare_sft_trainer_dataset": prepare_sft_trainer_dataset,
        **{name: getattr(trainers, name) for name in _TRAINERS},
    }


class TRLPatch(Patch):
    """Returned by `patch_trl()`: `undo()` ends this call's patch (TRL's objects come back
    once no other `patch_trl()` handle holds them), and using it as a context manager undoes
    it on exit."""

    owner = "trl"


def _replacements() -> dict[tuple[str, str], Any]:
    objects = _fastcollate_objects()
    return {place: objects[name] for name, places in _TARGETS.items() for place in places}


def patch_trl() -> TRLPatch:
    """Makes TRL build fastcollate's objects where TRL's modules look them up (`_TARGETS`
    lists each place): `SFTTrainer`'s collator (`DataCollatorForLanguageModeling`), the DPO,
    reward and KTO collators, the `pad` helper the trainers call, `pack_dataset`
    (`SFTConfig(packing=True)`), `SFTTrainer._prepare_dataset`, whose steps after tokenizing
    (labels, truncation, filtering, packing, shuffling) become `prepare_tokenized_sft_dataset`
    for a `datasets.Dataset`, and `SFTTrainer`, `DPOTrainer`, `RewardTrainer`, `KTOTrainer` in
    `trl` / `trl.trainer` (`fastcollate.trl`'s: batches collated straight from Arrow). Code
    that imported a name before the call keeps the object it imported. Calls nest: each
    returns its own handle, and TRL's objects come back when the last handle is undone (or at
    `unpatch_trl()`). Patching and undoing are thread-safe. Warns once
    (`fastcollate.UntestedVersionWarning`) when the installed TRL is not a release fastcollate
    is tested against (docs/compatibility.md).

    Undo with the returned handle's `undo()`, `with fastcollate.patch_trl(): ...`, or
    `unpatch_trl()` (every handle at once)."""
    require("fastcollate.patch_trl()", "trl", "torch", "trl")
    warn_if_untested("trl", "fastcollate.patch_trl()")
    return TRLPatch(_replacements())


def unpatch_trl() -> None:
    """Restores every object `patch_trl()` replaced, whatever handles are still held. Does
    nothing when unpatched."""
    restore("trl")
