"""Padding-free causal-LM training on packed batches: `fastcollate.Trainer` with
`train_sampling_strategy="packed"` fills each batch with whole sequences up to a token budget
(`PackedBatchSampler`) and flattens it into one row with `position_ids` restarting at every
sequence (`DataCollatorWithFlattening`), so no token is padding.

    python examples/packed_causal_lm.py                     # SmolLM2-135M on wikitext-2
    python examples/packed_causal_lm.py --tiny --tokenizer path/to/tokenizer   # offline

`--tiny` trains a tiny randomly initialised Llama on synthetic text (the tests use it with the
bundled MiniLM tokenizer). Runs unchanged under `torchrun --nproc_per_node N`."""

from __future__ import annotations

import argparse

import datasets
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

import fastcollate

WORDS = "the a cat dog sat ran on under mat log quickly slowly and then it".split()


def tiny_corpus(rows: int = 512) -> datasets.Dataset:
    texts = [
        " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(3 + i % 40)) for i in range(rows)
    ]
    return datasets.Dataset.from_dict({"text": texts})


def tiny_llama(vocab_size: int) -> LlamaForCausalLM:
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    return LlamaForCausalLM(config)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="HuggingFaceTB/SmolLM2-135M")
    parser.add_argument("--tokenizer", help="default: the model's")
    parser.add_argument("--tiny", action="store_true", help="synthetic text and a tiny model")
    parser.add_argument("--max-tokens", type=int, default=4096, help="token budget per batch")
    parser.add_argument("--max-steps", type=int, default=-1, help="stop early (default: 1 epoch)")
    parser.add_argument("--output-dir", default="packed-lm")
    options = parser.parse_args()

    tokenizer = AutoTokenizer.from_pretrained(options.tokenizer or options.model)
    if options.tiny:
        corpus = tiny_corpus()
        model = tiny_llama(len(tokenizer))
    else:
        corpus = datasets.load_dataset("wikitext", "wikitext-2-raw-v1", split="train")
        corpus = corpus.filter(lambda row: len(row["text"].strip()) > 0)
        model = AutoModelForCausalLM.from_pretrained(options.model)

    # No padding, no attention mask: each row is one whole sequence, cut to the budget.
    dataset = corpus.map(
        lambda batch: {
            "input_ids": tokenizer(batch["text"], truncation=True, max_length=options.max_tokens)[
                "input_ids"
            ]
        },
        batched=True,
        remove_columns=corpus.column_names,
    )
    args = fastcollate.TrainingArguments(
        output_dir=options.output_dir,
        train_sampling_strategy="packed",
        max_tokens_per_batch=options.max_tokens,
        learning_rate=1e-3 if options.tiny else 5e-5,
        num_train_epochs=1,
        max_steps=options.max_steps,
        logging_steps=5,
        save_strategy="no",
        report_to="none",
    )
    # DataCollatorWithFlattening is the default collator under "packed"
    trainer = fastcollate.Trainer(model=model, args=args, train_dataset=dataset)
    result = trainer.train()
    print(f"trained {result.global_step} steps, loss {result.training_loss:.3f}")


if __name__ == "__main__":
    main()
