"""Fast replacements for TRL's collators (TRL >= 1.16), same constructors and output.

`DataCollatorForLanguageModeling` is `SFTTrainer`'s collator: padded rows, or one padding-free
row (`padding_free=True`), with pre-packed rows' `seq_lengths` honoured. It subclasses TRL's
class, so TRL's own `isinstance` checks see it. `pack_dataset` is TRL's `pack_dataset` (the
same packed dataset), decided in Rust from the Arrow offsets. `prepare_tokenized_sft_dataset`
is what `SFTTrainer` does to a tokenized dataset (labels from the masks, truncation, filtering,
packing) as column operations over the Arrow buffers. `SFTTrainer`, `DPOTrainer`,
`RewardTrainer` and `KTOTrainer` are TRL's trainers with their DataLoaders reading batches
straight from Arrow (`patch_trl()` puts them in `trl`). Needs the `trl` extra:
`pip install 'fastcollate[trl]'`, or `pip install '.[trl]'` in a source checkout.

The preference collators: DPO's `DataCollatorForPreference`, the reward trainer's class of the
same name as `RewardDataCollatorForPreference`, KTO's `DataCollatorForUnpairedPreference`; and
TRL's `pad` helper, with `pad_with_mask` for the token lists GRPO and RLOO pad.
"""

from .._internal.extras import require

require("fastcollate.trl", "trl", "torch", "trl")

from ..preparation.pack_dataset import pack_dataset  # noqa: E402
from ..preparation.sft_dataset import prepare_tokenized_sft_dataset  # noqa: E402
from .language_modeling import DataCollatorForLanguageModeling  # noqa: E402
from .padding import pad, pad_with_mask  # noqa: E402
from .patch import TRLPatch, patch_trl, unpatch_trl  # noqa: E402
from .preference import (  # noqa: E402
    DataCollatorForPreference,
    DataCollatorForUnpairedPreference,
    RewardDataCollatorForPreference,
)
from .trainers import DPOTrainer, KTOTrainer, RewardTrainer, SFTTrainer  # noqa: E402

__all__ = [
    "DataCollatorForLanguageModeling",
    "DataCollatorForPreference",
    "RewardDataCollatorForPreference",
    "DataCollatorForUnpairedPreference",
    "pad",
    "pad_with_mask",
    "pack_dataset",
    "prepare_tokenized_sft_dataset",
    "SFTTrainer",
    "DPOTrainer",
    "RewardTrainer",
    "KTOTrainer",
    "patch_trl",
    "unpatch_trl",
    "TRLPatch",
]
