"""A hand-written accelerate loop over a packed stream: `fastcollate.PackedStream` packs a
`datasets` stream to a token budget (each rank keeps its own batches, every rank as many), and
`fastcollate.prepare(accelerator, loader)` prepares the loader without sharding it a second
time (plain `accelerator.prepare` would dispatch or slice the rank's batches again and lose
rows).

    accelerate launch --num_processes 2 examples/accelerate_stream.py --tiny --tokenizer PATH
    torchrun --nproc_per_node 2 examples/accelerate_stream.py --tiny --tokenizer PATH

`--tiny` uses synthetic text and a tiny randomly initialised Llama (the tests run it on two CPU
processes with the bundled MiniLM tokenizer); otherwise `--model` is trained on wikitext-2.
`--report DIR` writes each rank's steps, losses and the rows of every batch per epoch to
DIR/rank{N}.json."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import datasets
import torch
from accelerate import Accelerator
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

import fastcollate

WORDS = "the a cat dog sat ran on under mat log quickly slowly and then it".split()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="HuggingFaceTB/SmolLM2-135M")
    parser.add_argument("--tokenizer", help="default: the model's")
    parser.add_argument("--tiny", action="store_true", help="synthetic text and a tiny model")
    parser.add_argument("--max-tokens", type=int, default=4096, help="token budget per batch")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--report", help="folder for each rank's rank{N}.json")
    options = parser.parse_args()

    accelerator = Accelerator(cpu=not torch.cuda.is_available())
    torch.manual_seed(0)  # the same initial weights on every rank
    tokenizer = AutoTokenizer.from_pretrained(options.tokenizer or options.model)
    if options.tiny:
        texts = [" ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(3 + i % 40))
                 for i in range(256)]
        corpus = datasets.Dataset.from_dict({"text": texts})
        model = LlamaForCausalLM(LlamaConfig(
            vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2))
    else:
        corpus = datasets.load_dataset("wikitext", "wikitext-2-raw-v1", split="train")
        corpus = corpus.filter(lambda row: len(row["text"].strip()) > 0)
        model = AutoModelForCausalLM.from_pretrained(options.model)
    tokenized = corpus.map(
        lambda batch, rows: {
            "input_ids": tokenizer(batch["text"], truncation=True,
                                   max_length=options.max_tokens)["input_ids"],
            "row": rows,
        },
        batched=True, with_indices=True, remove_columns=corpus.column_names,
    )
    # A stream, as load_dataset(..., streaming=True) gives; every rank reads it whole and
    # keeps its own packed batches (num_replicas and rank come from the process group).
    stream = tokenized.to_iterable_dataset(num_shards=4)
    packed = fastcollate.PackedStream(stream, options.max_tokens, buffer=256, seed=0)
    flatten = fastcollate.DataCollatorWithFlattening()

    def collate(rows):
        # the packed batch, and its rows' numbers for the report
        return flatten([{"input_ids": row["input_ids"]} for row in rows]), [r["row"] for r in rows]

    loader = torch.utils.data.DataLoader(packed, batch_size=None, collate_fn=collate)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3 if options.tiny else 5e-5)
    model, optimizer = accelerator.prepare(model, optimizer)
    loader = fastcollate.prepare(accelerator, loader)  # not accelerator.prepare(loader)

    losses, rows_per_epoch = [], []
    for epoch in range(options.epochs):
        packed.set_epoch(epoch)
        rows_per_epoch.append([])
        for batch, rows in loader:
            # packed rows: the model finds the sequences from position_ids; no KV cache
            loss = model(**batch, use_cache=False).loss
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.item())
            rows_per_epoch[-1].append(rows)
    rank = accelerator.process_index
    print(f"rank {rank}/{accelerator.num_processes}: {len(losses)} steps, "
          f"loss {losses[0]:.3f} -> {losses[-1]:.3f}")
    if options.report:
        report = {"rank": rank, "losses": losses, "rows": rows_per_epoch,
                  "dataset_rows": len(tokenized)}
        Path(options.report, f"rank{rank}.json").write_text(json.dumps(report))
    accelerator.end_training()


if __name__ == "__main__":
    main()
