"""PackedStream and LengthGroupedStream in two processes (torchrun, gloo on CPU), run by
tests/sampling/test_multiprocess_packed_stream.py. Each rank writes OUT/rank{N}.json: the rows of
every batch a plain DataLoader over a PackedStream / LengthGroupedStream yielded per epoch, the
rows of every batch fastcollate.Trainer (whose loader accelerate prepares) trained on with
train_sampling_strategy="packed" and "group_by_length" on a stream, and what iterating such a
DataLoader after `accelerator.prepare` gave (an error) with and without dispatch_batches, with
no, forked and spawned DataLoader workers."""

from __future__ import annotations

import argparse
import multiprocessing

import datasets
import torch
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration
from transformers import AutoTokenizer

import fastcollate
from tests.support.bundled_model import model_dir
from tests.support.multiprocess_packed_train import RecordingTrainer, counting_rows
from tests.support.rank_report import finish_rank
from tests.support.tiny_models import tiny_model

ROWS = 90
BUDGET = 96
EPOCHS = 2
GROUP_BATCH = 4
# DataLoader worker settings tried after `accelerator.prepare`: fork only where the platform
# has it (not Windows).
WORKER_SETTINGS = [(0, None), (2, "spawn")]
if "fork" in multiprocessing.get_all_start_methods():
    WORKER_SETTINGS.insert(1, (2, "fork"))


class PaddedRecordingTrainer(fastcollate.Trainer):
    def compute_loss(self, model, inputs, *args, **kwargs):
        mask = inputs["attention_mask"].bool()
        self.seen.append([ids[keep].tolist() for ids, keep in zip(inputs["input_ids"], mask,
                                                                    strict=True)])
        return super().compute_loss(model, inputs, *args, **kwargs)


def row_numbers(rows):
    return [row["row"] for row in rows]


def prepared_outcomes(streams) -> dict[str, str]:
    """For each stream, dispatch_batches and worker setting: what iterating the DataLoader over
    the stream gives after `accelerator.prepare` (the error's type and text, or how many
    batches)."""
    outcomes = {}
    for dispatch in (None, False):
        accelerator = Accelerator(
            cpu=True, dataloader_config=DataLoaderConfiguration(dispatch_batches=dispatch))
        for name, stream in streams.items():
            for workers, context in WORKER_SETTINGS:
                loader = torch.utils.data.DataLoader(
                    stream, batch_size=None, num_workers=workers,
                    multiprocessing_context=context, collate_fn=row_numbers)
                prepared = accelerator.prepare(loader)
                try:
                    outcome = f"{len(list(prepared))} batches"
                except Exception as err:  # the report says which
                    outcome = f"{type(err).__name__}: {err}"
                outcomes[f"{name} dispatch={dispatch} workers={workers} {context}"] = outcome
    return outcomes


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

    # Length-grouped: a plain DataLoader with two workers per rank, then the Trainer.
    grouped = fastcollate.LengthGroupedStream(dataset.to_iterable_dataset(num_shards=3),
                                              GROUP_BATCH, buffer=20, seed=options.seed)
    grouped_loader = torch.utils.data.DataLoader(
        grouped, batch_size=None, num_workers=2, collate_fn=lambda rows: [r["row"] for r in rows])
    grouped_epochs = []
    for epoch in range(EPOCHS):
        grouped.set_epoch(epoch)
        grouped_epochs.append(list(grouped_loader))
    group_args = fastcollate.TrainingArguments(
        output_dir=options.out, train_sampling_strategy="group_by_length",
        group_by_length_buffer=20, per_device_train_batch_size=GROUP_BATCH, max_steps=24,
        seed=options.seed, report_to="none", use_cpu=True, save_strategy="no",
        disable_tqdm=True)
    tokenizer = AutoTokenizer.from_pretrained(model_dir())
    group_trainer = PaddedRecordingTrainer(
        model=tiny_model("llama", "sdpa", seed=options.seed), args=group_args,
        train_dataset=stream,
        data_collator=fastcollate.DataCollatorForLanguageModeling(tokenizer, mlm=False))
    group_trainer.seen = []
    group_trainer.train()
    group_trained = [[row_of[tuple(ids)] for ids in batch] for batch in group_trainer.seen]
    group_epoch_steps = len(list(fastcollate.LengthGroupedStream(
        stream, GROUP_BATCH, buffer=20, seed=options.seed)))

    # Last: a refused prepared loader leaves accelerate's gradient state mid-iteration.
    outcomes = prepared_outcomes({
        "PackedStream": fastcollate.PackedStream(stream, BUDGET, buffer=32),
        "LengthGroupedStream": fastcollate.LengthGroupedStream(stream, GROUP_BATCH, buffer=20),
    })

    report = {"rank": rank, "prepared": outcomes,
              "lengths": [len(s) for s in sequences], "epochs": epochs,
              "trained": trained, "first_epoch_steps": first_epoch_steps,
              "world": packed.num_replicas, "packed_rank": packed.rank,
              "grouped_epochs": grouped_epochs, "group_trained": group_trained,
              "group_epoch_steps": group_epoch_steps}
    finish_rank(options.out, rank, report)


if __name__ == "__main__":
    main()
