"""Resume through torchdata's `StatefulDataLoader` (accelerate's `use_stateful_dataloader`):
a hand-written accelerate loop over a `PackedStream` / `LengthGroupedStream` prepared by
`fastcollate.prepare`, stopped right after `accelerator.save_state` inside epoch 0, at the end
of epoch 0 and inside epoch 1, then resumed with `accelerator.load_state`, yields every batch
the uninterrupted loop yields from there, one for one (0 and 2 DataLoader workers); and
`fastcollate.Trainer` with a stateful accelerator resumes a packed and a grouped stream inside
epoch 1 batch for batch, with the same final weights."""

from __future__ import annotations

import json

import datasets
import pytest
import torch
import transformers
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration

import fastcollate
from tests.support.resume_runs import Recording, StopAfterSave

# Two of the loop's cases run DataLoader workers; the Trainer cases train twice.
pytestmark = [pytest.mark.multiprocess, pytest.mark.slow]

pytest.importorskip("torchdata.stateful_dataloader")

ROWS = 48
BUDGET = 64
BATCH = 4
EPOCHS = 3


def sequences(rows=ROWS):
    return [[5 + i % 50] * (2 + (i * 7) % 30) for i in range(rows)]


def stream_of(kind):
    source = datasets.Dataset.from_dict({"input_ids": sequences(), "row": list(range(ROWS))})
    source = source.to_iterable_dataset(num_shards=2).shuffle(seed=1, buffer_size=8)
    if kind == "packed":
        return fastcollate.PackedStream(source, BUDGET, buffer=12, seed=3)
    return fastcollate.LengthGroupedStream(source, BATCH, buffer=12, seed=3)


def loop(kind, workers, out, stop=None, resume=None):
    """Every batch (its rows' numbers) of EPOCHS epochs, or up to the `stop`-th, saved there
    with the epoch to go on in; resumed from `resume` when given."""
    accelerator = Accelerator(
        cpu=True, dataloader_config=DataLoaderConfiguration(use_stateful_dataloader=True))
    loader = torch.utils.data.DataLoader(stream_of(kind), batch_size=None, num_workers=workers,
                                         collate_fn=lambda rows: [r["row"] for r in rows])
    loader = fastcollate.prepare(accelerator, loader)
    assert type(loader.base_dataloader).__name__ == "StatefulDataLoader"
    first_epoch, seen = 0, []
    if resume is not None:
        accelerator.load_state(resume)
        first_epoch = json.loads((resume / "epoch.json").read_text())
    for epoch in range(first_epoch, EPOCHS):
        loader.set_epoch(epoch)
        for batch in loader:
            seen.append(batch)
            if len(seen) == stop:
                accelerator.save_state(str(out))
                # The loop keeps its own epoch: the next one when this was the last batch.
                (out / "epoch.json").write_text(json.dumps(epoch + loader.end_of_dataloader))
                return seen
    return seen


@pytest.mark.parametrize(("kind", "workers"), [("packed", 0), ("packed", 2), ("grouped", 0)])
def test_hand_written_loop_resumes_through_the_stateful_loader(tmp_path, kind, workers):
    full = loop(kind, workers, tmp_path)
    per_epoch = len(full) // EPOCHS
    assert len(full) == EPOCHS * per_epoch and per_epoch > 4
    assert sorted(r for b in full[:per_epoch] for r in b) == list(range(ROWS))
    # Inside epoch 0, at its end, inside epoch 1.
    for stop in (per_epoch // 2, per_epoch, per_epoch + per_epoch // 2):
        out = tmp_path / f"stop{stop}"
        assert loop(kind, workers, out, stop=stop) == full[:stop]
        assert loop(kind, workers, out, resume=out) == full[stop:], f"resumed at {stop}"


class StatefulRecording(Recording):
    """Records each trained batch; its accelerator uses torchdata's StatefulDataLoader."""

    def create_accelerator_and_postprocess(self):
        super().create_accelerator_and_postprocess()
        # transformers 5's AcceleratorConfig has no use_stateful_dataloader: set on the
        # accelerator's own configuration, as a subclass would.
        self.accelerator.dataloader_config.use_stateful_dataloader = True


TRAIN_ROWS = 24


def trainer_stream(kind, epoch):
    """The stream the Trainer makes for `kind` (same seed and buffer), at `epoch`."""
    rows = datasets.Dataset.from_dict({"input_ids": sequences(TRAIN_ROWS)})
    rows = rows.to_iterable_dataset(num_shards=2)
    if kind == "packed":
        stream = fastcollate.PackedStream(rows, BUDGET, seed=3)
    else:
        stream = fastcollate.LengthGroupedStream(rows, BATCH, buffer=12, seed=3)
    stream.set_epoch(epoch)
    return stream


def train(kind, tokenizer, out, max_steps, stop=None, resume=None):
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32,
                                      num_hidden_layers=1, num_attention_heads=2,
                                      num_key_value_heads=2)
    torch.manual_seed(1)
    model = transformers.LlamaForCausalLM(config)
    strategy = {"packed": {"train_sampling_strategy": "packed", "max_tokens_per_batch": BUDGET},
                "grouped": {"train_sampling_strategy": "group_by_length",
                            "group_by_length_buffer": 12}}[kind]
    args = fastcollate.TrainingArguments(
        output_dir=str(out), per_device_train_batch_size=BATCH, max_steps=max_steps,
        learning_rate=1e-2, seed=3, report_to="none", use_cpu=True, save_strategy="no",
        disable_tqdm=True, **strategy)
    collator = None if kind == "packed" else fastcollate.DataCollatorForLanguageModeling(
        tokenizer, mlm=False)
    rows = datasets.Dataset.from_dict({"input_ids": sequences(TRAIN_ROWS)})
    trainer = StatefulRecording(model=model, args=args, data_collator=collator,
                        train_dataset=rows.to_iterable_dataset(num_shards=2),
                        callbacks=[StopAfterSave(stop)] if stop else None)
    assert trainer.accelerator.use_stateful_dataloader
    trainer.seen = []
    trainer.train(resume_from_checkpoint=resume)
    return trainer


@pytest.mark.parametrize("kind", ["packed", "grouped"])
def test_trainer_with_a_stateful_accelerator_resumes_batch_for_batch(tmp_path, kind,
                                                                     bert_tokenizer):
    first, second = (len(list(trainer_stream(kind, epoch))) for epoch in range(2))
    max_steps = first + second + 2  # into epoch 2
    full = train(kind, bert_tokenizer, tmp_path / "full", max_steps)
    assert len(full.seen) == max_steps
    # Inside epoch 1 (the loop test above stops inside epoch 0 and at its end too).
    for stop in (first + second // 2,):
        out = tmp_path / f"stop{stop}"
        assert train(kind, bert_tokenizer, out, max_steps, stop=stop).seen == full.seen[:stop]
        resumed = train(kind, bert_tokenizer, out, max_steps,
                        resume=str(out / f"checkpoint-{stop}"))
        assert resumed.seen == full.seen[stop:], f"resumed at {stop}"
        for (name, ours), theirs in zip(resumed.model.state_dict().items(),
                                        full.model.state_dict().values(), strict=True):
            assert torch.equal(ours, theirs), name
