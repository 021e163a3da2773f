"""The tiny random-weight Llama the TRL trainer tests train: one layer, 32 wide, sized to the
tokenizer's vocabulary, so a few CPU steps take seconds."""

from __future__ import annotations

from transformers import LlamaConfig


def tiny_llama_config(tokenizer, **extra) -> LlamaConfig:
    """A one-layer Llama config for `tokenizer`; `extra` adds or overrides fields."""
    fields = dict(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=128,
    )
    fields.update(extra)
    return LlamaConfig(**fields)
