"""The SFTTrainer modes and train datasets the `patch_trl()` tests run, TRL alone and patched."""

from __future__ import annotations

import pytest
from datasets import Dataset

# TRL deprecates truncation_mode="keep_end" (SFTConfig warns); the runs that use it on
# purpose, to compare fastcollate's keep_end with TRL's while TRL has it, expect the warning.
KEEP_END_DEPRECATED = pytest.mark.filterwarnings(
    "ignore:The `'keep_end'` truncation mode is deprecated:FutureWarning"
)


MODES = {
    "padded": {"max_length": 24},
    # TRL refuses max_length with padding_free unless packing (it would not be enforced).
    "padding-free": {"padding_free": True, "max_length": None},
    "packed": {"packing": True, "max_length": 24},
    # Rows longer than max_length cut from the start, the dataset shuffled.
    "keep-end-shuffled": {"max_length": 9, "truncation_mode": "keep_end", "shuffle_dataset": True},
    # Long prompt-completion rows keep prompt tokens only, and are dropped.
    "short-shuffled": {"max_length": 9, "shuffle_dataset": True},
    # Shuffled before packing too.
    "packed-wrapped-shuffled": {
        "packing": True,
        "packing_strategy": "wrapped",
        "max_length": 16,
        "shuffle_dataset": True,
    },
}


def mode_params() -> list:
    """The modes as pytest parameters, the keep_end ones expecting TRL's warning."""
    return [
        pytest.param(mode, marks=KEEP_END_DEPRECATED)
        if options.get("truncation_mode") == "keep_end"
        else mode
        for mode, options in MODES.items()
    ]


TEXTS = [
    "the cat sat on the mat",
    "a dog ran in the park and then sat down by the old tree",
    "birds sing",
    "the quick brown fox jumps over the lazy dog again and again",
    "rain",
    "a long and winding road leads to the house on the hill",
]


def sft_dataset(tokenizer, data: str = "tokenized") -> Dataset:
    """The train dataset: tokenized (TRL's preparation starts after tokenizing), raw text (TRL
    adds EOS and tokenizes first), or prompt-completion text (labels from the completion mask)."""
    if data == "text":
        return Dataset.from_dict({"text": TEXTS * 4})
    if data == "prompt-completion":
        return Dataset.from_dict(
            {
                "prompt": [" ".join(text.split()[:-1]) for text in TEXTS] * 4,
                "completion": [" " + text.split()[-1] for text in TEXTS] * 4,
            }
        )
    ids = tokenizer(TEXTS * 4)["input_ids"]
    return Dataset.from_dict({"input_ids": ids})
