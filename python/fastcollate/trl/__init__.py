"""Fast replacements for TRL's collators (TRL >= 1.16), same constructors and output.

`DataCollatorForLanguageModeling` is `SFTTrainer`'s collator: padded rows, or one padding-free
row (`padding_free=True`), with pre-packed rows' `seq_lengths` honoured. It subclasses TRL's
class, so TRL's own `isinstance` checks see it. Needs `pip install 'fastcollate[trl]'`.
"""

from .._internal.extras import require

require("fastcollate.trl", "trl", "torch", "trl")

from .language_modeling import DataCollatorForLanguageModeling  # noqa: E402

__all__ = ["DataCollatorForLanguageModeling"]
