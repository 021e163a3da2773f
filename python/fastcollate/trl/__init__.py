"""Fast replacements for TRL's collators (TRL >= 1.16), same constructors and output.

`DataCollatorForLanguageModeling` is `SFTTrainer`'s collator: padded rows, or one padding-free
row (`padding_free=True`), with pre-packed rows' `seq_lengths` honoured. It subclasses TRL's
class, so TRL's own `isinstance` checks see it. `pack_dataset` is TRL's `pack_dataset` (the
same packed dataset), decided in Rust from the Arrow offsets. `prepare_tokenized_sft_dataset`
is what `SFTTrainer` does to a tokenized dataset (labels from the masks, truncation, filtering,
packing) as column operations over the Arrow buffers. Needs
`pip install 'fastcollate[trl]'`.
"""

from .._internal.extras import require

require("fastcollate.trl", "trl", "torch", "trl")

from ..sampling.pack_dataset import pack_dataset  # noqa: E402
from .language_modeling import DataCollatorForLanguageModeling  # noqa: E402
from .patch import TRLPatch, patch_trl, unpatch_trl  # noqa: E402
from .sft_preparation import prepare_tokenized_sft_dataset  # noqa: E402

__all__ = [
    "DataCollatorForLanguageModeling",
    "pack_dataset",
    "prepare_tokenized_sft_dataset",
    "patch_trl",
    "unpatch_trl",
    "TRLPatch",
]
