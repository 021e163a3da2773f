"""PackedStream in two processes (torchrun, gloo on CPU), run by
tests/test_multiprocess_packed_stream.py. Each rank writes OUT/rank{N}.json: the rows of every
batch a plain DataLoader over a PackedStream yielded per epoch, and the rows of every batch
fastcollate.Trainer trained on with train_sampling_strategy="packed" on a stream."""

from __future__ import annotations

import argparse

import datasets
import torch
from multiprocess_packed_train import RecordingTrainer, counting_rows
from rank_report import finish_rank
from test_packed_training import tiny_model

import fastcollate

ROWS = 90
BUDGET = 96
EPOCHS = 2


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args()
    torch.distributed.init_process_group("gloo")
    rank = torch.distributed.get_rank()

    sequences = counting_rows(ROWS, options.seed)
    dataset = datasets.Dataset.from_dict({"input_ids": sequences, "row": list(range(ROWS))})
    # num_replicas and rank from the process group; two DataLoader workers per rank.
    packed = fastcollate.PackedStream(dataset.to_iterable_dataset(num_shards=3), BUDGET,
                                      buffer=32, seed=options.seed)
    loader = torch.utils.data.DataLoader(packed, batch_size=None, num_workers=2,
                                         collate_fn=lambda rows: [r["row"] for r in rows])
    epochs = []
    for epoch in range(EPOCHS):
        packed.set_epoch(epoch)
        epochs.append(list(loader))

    args = fastcollate.TrainingArguments(
        output_dir=options.out, train_sampling_strategy="packed", max_tokens_per_batch=BUDGET,
        max_steps=12, logging_steps=1, seed=options.seed, report_to="none", use_cpu=True,
        save_strategy="no", disable_tqdm=True)
    stream = datasets.Dataset.from_dict({"input_ids": sequences}).to_iterable_dataset()
    first_epoch_steps = len(list(fastcollate.PackedStream(stream, BUDGET, seed=options.seed)))
    trainer = RecordingTrainer(model=tiny_model("llama", "sdpa", seed=options.seed), args=args,
                               train_dataset=stream)
    trainer.seen = []
    trainer.train()
    row_of = {tuple(s): i for i, s in enumerate(sequences)}
    trained = []
    for ids, positions in trainer.seen:
        starts = [k for k, p in enumerate(positions) if p == 0] + [len(positions)]
        trained.append([row_of[tuple(ids[a:b])]
                        for a, b in zip(starts[:-1], starts[1:], strict=True)])
    report = {"rank": rank, "lengths": [len(s) for s in sequences], "epochs": epochs,
              "trained": trained, "first_epoch_steps": first_epoch_steps,
              "world": packed.num_replicas, "packed_rank": packed.rank}
    finish_rank(options.out, rank, report)


if __name__ == "__main__":
    main()
