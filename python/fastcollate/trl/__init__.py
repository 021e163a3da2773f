"""Fast replacements for TRL's collators (TRL >= 1.16), same constructors and output.

`DataCollatorForLanguageModeling` is `SFTTrainer`'s collator: padded rows, or one padding-free
row (`padding_free=True`), with pre-packed rows' `seq_lengths` honoured. It subclasses TRL's
class, so TRL's own `isinstance` checks see it. `pack_dataset` is TRL's `pack_dataset` (the
same packed dataset), decided in Rust from the Arrow offsets. Needs
`pip install 'fastcollate[trl]'`.

The preference collators: DPO's `DataCollatorForPreference`, the reward trainer's class of the
same name as `RewardDataCollatorForPreference`, KTO's `DataCollatorForUnpairedPreference`; and
TRL's `pad` helper, with `pad_with_mask` for the token lists GRPO and RLOO pad.
"""

from .._internal.extras import require

require("fastcollate.trl", "trl", "torch", "trl")

from ..sampling.pack_dataset import pack_dataset  # noqa: E402
from .language_modeling import DataCollatorForLanguageModeling  # noqa: E402
from .padding import pad, pad_with_mask  # noqa: E402
from .preference import (  # noqa: E402
    DataCollatorForPreference,
    DataCollatorForUnpairedPreference,
    RewardDataCollatorForPreference,
)

__all__ = ["DataCollatorForLanguageModeling", "pack_dataset"]
__all__ += ["DataCollatorForPreference", "DataCollatorForUnpairedPreference"]
__all__ += ["RewardDataCollatorForPreference", "pad", "pad_with_mask"]
