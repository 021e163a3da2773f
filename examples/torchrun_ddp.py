"""A plain PyTorch DistributedDataParallel loop (no Trainer) fed by fastcollate: each rank packs
its share of the sequences to a token budget with `PackedBatchSampler`, batches come straight
from Arrow (`ArrowBatches`) and are flattened padding-free by `DataCollatorWithFlattening`.

    torchrun --nproc_per_node 2 examples/torchrun_ddp.py --tiny --tokenizer path/to/tokenizer

`--tiny` uses synthetic text and a tiny randomly initialised Llama (the tests run it on two CPU
processes with the bundled MiniLM tokenizer); otherwise `--model` is loaded and trained on
wikitext-2. Uses NCCL on GPUs, gloo on CPUs. `--report DIR` writes each rank's steps and
losses to DIR/rank{N}.json (DIR is created when missing)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import datasets
import torch
import torch.distributed as dist
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
    if options.report:
        Path(options.report).mkdir(parents=True, exist_ok=True)  # before training, not after

    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    device = (
        torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if cuda else torch.device("cpu")
    )
    torch.manual_seed(0)  # the same initial weights on every rank

    tokenizer = AutoTokenizer.from_pretrained(options.tokenizer or options.model)
    if options.tiny:
        texts = [
            " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(3 + i % 40)) for i in range(256)
        ]
        corpus = datasets.Dataset.from_dict({"text": texts})
        config = LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
        )
        model = LlamaForCausalLM(config)
    else:
        corpus = datasets.load_dataset("wikitext", "wikitext-2-raw-v1", split="train")
        corpus = corpus.filter(lambda row: len(row["text"].strip()) > 0)
        model = AutoModelForCausalLM.from_pretrained(options.model)
    dataset = corpus.map(
        lambda batch: {
            "input_ids": tokenizer(batch["text"], truncation=True, max_length=options.max_tokens)[
                "input_ids"
            ]
        },
        batched=True,
        remove_columns=corpus.column_names,
    )

    # Every rank builds the same packing from the same seed and takes its own batches; all
    # ranks get the same number of batches, so none waits at a collective for another.
    sampler = fastcollate.PackedBatchSampler(
        fastcollate.sequence_lengths(dataset),
        max_tokens=options.max_tokens,
        seed=0,
        num_replicas=world_size,
        rank=rank,
    )
    loader = torch.utils.data.DataLoader(
        fastcollate.ArrowBatches(dataset),
        batch_sampler=sampler,
        collate_fn=fastcollate.DataCollatorWithFlattening(),
    )
    model = torch.nn.parallel.DistributedDataParallel(model.to(device))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3 if options.tiny else 5e-5)

    losses, tokens = [], 0
    for epoch in range(options.epochs):
        sampler.set_epoch(epoch)
        for batch in loader:
            batch = {key: value.to(device) for key, value in batch.items()}
            # packed rows: the model finds the sequences from position_ids; no KV cache
            loss = model(**batch, use_cache=False).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.item())
            tokens += batch["input_ids"].numel()
    print(
        f"rank {rank}/{world_size}: {len(losses)} steps, {tokens} tokens, "
        f"loss {losses[0]:.3f} -> {losses[-1]:.3f}"
    )
    if options.report:
        report = {"rank": rank, "steps": len(losses), "tokens": tokens, "losses": losses}
        Path(options.report, f"rank{rank}.json").write_text(json.dumps(report))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
