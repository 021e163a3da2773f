"""Dataset preparation before training, as column operations over a `datasets.Dataset`'s Arrow
table (no per-row Python), each giving the dataset TRL's own function returns:

- `pack_dataset`: `pack_dataset`, TRL's packing of sequences into rows of at most
  `seq_length` tokens, planned by the Rust core from the list offsets;
- `sft_dataset`: `prepare_tokenized_sft_dataset`, what `SFTTrainer._prepare_dataset` does to a
  tokenized dataset (labels from the masks, truncation, filtering, packing).

Neither imports TRL; their public names are `fastcollate.trl.pack_dataset` and
`fastcollate.trl.prepare_tokenized_sft_dataset`. The modules are not re-exported here, so that
`fastcollate.preparation.pack_dataset` stays the module and not the function of that name.
"""

from .._internal.extras import require

# Both modules import datasets and pyarrow at module level: a missing one is named here with
# the command that installs it, before either module loads.
require("fastcollate.preparation", "transformers", "datasets", "pyarrow")
