"""Every private name of transformers, TRL and accelerate that fastcollate relies on, in one
place: the attributes it reads or sets on their objects, the methods it calls, and the methods
its subclasses override (an upstream rename leaves an override silently uncalled).

Code reads or calls these through the constants below (a method that fastcollate overrides
is defined under its own name: its entry is in `PRIVATE_NAMES` all the same). The test
`tests/integrations/test_upstream_names.py` checks each entry of `PRIVATE_NAMES` against the
installed libraries, so an upstream rename fails one test that names the attribute and what
uses it. Importing this module imports none of those libraries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

# transformers' BatchEncoding: the instance attributes besides `data` that its `__init__` sets
# (to None for a batch not made by a tokenizer's backend). fastcollate makes a BatchEncoding
# without `__init__` and sets them itself.
BATCH_ENCODING_ENCODINGS: Final = "_encodings"
BATCH_ENCODING_N_SEQUENCES: Final = "_n_sequences"

# transformers' tokenizers: where the pad token, the backend and the pad token type id are
# stored on the instance, and the lookup that turns a token into an id.
TOKENIZER_SPECIAL_TOKENS_MAP: Final = "_special_tokens_map"
TOKENIZER_BACKEND: Final = "_tokenizer"
TOKENIZER_PAD_TOKEN_TYPE_ID: Final = "_pad_token_type_id"
TOKENIZER_CONVERT_TOKEN_TO_ID: Final = "_convert_token_to_id_with_added_voc"
# The methods `tokenizer.pad` goes through: a class that overrides them pads its own way.
TOKENIZER_PAD_METHODS: Final = ("_pad", "_get_padding_truncation_strategies")
TOKENIZER_RESOLVE_PADDING: Final = "_get_padding_truncation_strategies"

# transformers' SequenceFeatureExtractor: the methods its `pad` goes through.
FEATURE_EXTRACTOR_PAD_METHODS: Final = ("_pad", "_truncate", "_get_padding_strategies")

# transformers' DataCollatorForLanguageModeling: the whole-word masking helpers its masking
# methods call on the collator.
LANGUAGE_MODELING_WORD_IDS: Final = "_calc_word_ids_and_prob_mask"
LANGUAGE_MODELING_WHOLE_WORD_MASK: Final = "_whole_word_mask"

# transformers' Trainer: the methods fastcollate calls on it.
TRAINER_OUTPUT_DIR: Final = "_get_output_dir"
TRAINER_COLLATOR_WITH_REMOVED_COLUMNS: Final = "_get_collator_with_removed_columns"

# TRL's SFTTrainer: the dataset preparation `patch_trl()` replaces (a dotted path in its
# module, as `patching.original` takes it).
SFT_TRAINER_MODULE: Final = "trl.trainer.sft_trainer"
SFT_TRAINER_PREPARE_DATASET: Final = "SFTTrainer._prepare_dataset"

# accelerate's Accelerator: the list of the DataLoaders it prepared (`accelerator.prepare`
# appends to it; so does `fastcollate.prepare`).
ACCELERATOR_DATALOADERS: Final = "_dataloaders"


@dataclass(frozen=True)
class PrivateName:
    """One private name: `owner` is the dotted path of the class it belongs to (the module
    that defines it, then the class), `name` the attribute; `on_instance` when it is an
    instance attribute (the test then looks for it on an instance); `used_by` what in
    fastcollate relies on it."""

    owner: str
    name: str
    used_by: str
    on_instance: bool = False


_BATCH_ENCODING = "transformers.tokenization_utils_base.BatchEncoding"
_TOKENIZER_BASE = "transformers.tokenization_utils_base.PreTrainedTokenizerBase"
_TOKENIZER = "transformers.tokenization_utils_tokenizers.TokenizersBackend"
_FEATURE_EXTRACTOR = "transformers.feature_extraction_sequence_utils.SequenceFeatureExtractor"
_LANGUAGE_MODELING = "transformers.data.data_collator.DataCollatorForLanguageModeling"
_TRAINER = "transformers.trainer.Trainer"

PRIVATE_NAMES: Final[tuple[PrivateName, ...]] = (
    PrivateName(_BATCH_ENCODING, BATCH_ENCODING_ENCODINGS,
                "_internal/tensors.batch_encoding and the native call plan make BatchEncodings "
                "without __init__", on_instance=True),
    PrivateName(_BATCH_ENCODING, BATCH_ENCODING_N_SEQUENCES,
                "_internal/tensors.batch_encoding and the native call plan make BatchEncodings "
                "without __init__", on_instance=True),
    PrivateName(_TOKENIZER, TOKENIZER_SPECIAL_TOKENS_MAP,
                "collators/tokenizer_state keys the tokenizer's padding settings on it",
                on_instance=True),
    PrivateName(_TOKENIZER, TOKENIZER_BACKEND,
                "collators/tokenizer_state asks the backend for the pad token's id",
                on_instance=True),
    PrivateName(_TOKENIZER, TOKENIZER_PAD_TOKEN_TYPE_ID,
                "collators/tokenizer_state keys the tokenizer's padding settings on it",
                on_instance=True),
    PrivateName(_TOKENIZER, TOKENIZER_CONVERT_TOKEN_TO_ID,
                "collators/tokenizer_state: a class overriding it is not keyed"),
    *(
        PrivateName(_TOKENIZER_BASE, name,
                    "integrations/tokenizer_pad routes a tokenizer that keeps it to fastcollate")
        for name in TOKENIZER_PAD_METHODS
    ),
    *(
        PrivateName(_FEATURE_EXTRACTOR, name,
                    "collators/feature_extraction pads natively for an extractor that keeps it")
        for name in FEATURE_EXTRACTOR_PAD_METHODS
    ),
    PrivateName(_LANGUAGE_MODELING, LANGUAGE_MODELING_WORD_IDS,
                "collators/language_modeling forwards to it for mask_rng='torch'"),
    PrivateName(_LANGUAGE_MODELING, LANGUAGE_MODELING_WHOLE_WORD_MASK,
                "collators/language_modeling forwards to it for mask_rng='torch'"),
    PrivateName(_TRAINER, TRAINER_OUTPUT_DIR,
                "integrations/trainer.StreamPosition saves the stream position beside a "
                "checkpoint"),
    PrivateName(_TRAINER, TRAINER_COLLATOR_WITH_REMOVED_COLUMNS,
                "integrations/trainer collates stream batches as the Trainer's loaders do"),
    # Overridden by fastcollate's Trainer (integrations/trainer) and its Arrow mixin
    # (arrow/trainer_datasets).
    PrivateName(_TRAINER, "_init_training_state",
                "integrations/trainer.Trainer overrides it to resume a stream"),
    PrivateName(_TRAINER, "_run_epoch",
                "integrations/trainer.Trainer overrides it to count a stream's batches"),
    PrivateName(_TRAINER, "_get_dataloader",
                "integrations/trainer.Trainer overrides it for streams and Arrow batches"),
    PrivateName(_TRAINER, "_get_train_sampler",
                "integrations/trainer.Trainer and arrow/trainer_datasets override it"),
    PrivateName(_TRAINER, "_get_eval_sampler",
                "integrations/trainer.Trainer and arrow/trainer_datasets override it"),
    PrivateName(_TRAINER, "_remove_unused_columns",
                "arrow/trainer_datasets.ArrowDataLoaderMixin overrides it"),
    PrivateName(f"{SFT_TRAINER_MODULE}.SFTTrainer", SFT_TRAINER_PREPARE_DATASET.split(".")[1],
                "trl/patch and trl/sft_trainer_preparation replace it under patch_trl()"),
    PrivateName("accelerate.accelerator.Accelerator", ACCELERATOR_DATALOADERS,
                "integrations/accelerate_loader registers the loader fastcollate.prepare "
                "prepares", on_instance=True),
)
