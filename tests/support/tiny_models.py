"""Tiny random-weight causal LMs (no download), so a few CPU steps take seconds: the one-layer
Llama the TRL trainer tests train, sized to a tokenizer's vocabulary, and the Llama / Qwen2 of
the packed-training tests with the counting rows they learn."""

from __future__ import annotations

import torch
import transformers
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


VOCAB = 96


def tiny_config(family: str, attention: str):
    # use_cache=False, as Trainer sets it: with a cache transformers does not look for packed
    # sequences in position_ids (masking_utils), and attention would cross sequence boundaries.
    common = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        use_cache=False,
        pad_token_id=0,
        attn_implementation=attention,
    )
    config_class = {"llama": transformers.LlamaConfig, "qwen2": transformers.Qwen2Config}[family]
    return config_class(**common)


def tiny_model(family="llama", attention="sdpa", seed=0):
    torch.manual_seed(seed)
    return transformers.AutoModelForCausalLM.from_config(tiny_config(family, attention))


def counting_rows(n, seed=0):
    """Sequences that count up from a random start (mod VOCAB): quickly learnable."""
    generator = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        length = int(torch.randint(4, 40, (1,), generator=generator))
        start = int(torch.randint(1, VOCAB, (1,), generator=generator))
        out.append([1 + (start + k) % (VOCAB - 1) for k in range(length)])
    return out
