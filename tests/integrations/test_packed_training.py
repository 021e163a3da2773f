"""Padding-free training with packing: a tiny causal LM built from a config (random weights, no
download) gives the same per-token loss on a packed batch as on the same rows padded, and
fastcollate.Trainer fine-tunes it with train_sampling_strategy="packed"."""

from __future__ import annotations

import math

import datasets
import pytest
import torch
import transformers

import fastcollate
from tests.support.tiny_models import VOCAB, counting_rows, tiny_model


def rows(lengths, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [
        {"input_ids": torch.randint(1, VOCAB, (n,), generator=generator).tolist()} for n in lengths
    ]


def padded(features):
    width = max(len(f["input_ids"]) for f in features)
    ids = torch.zeros(len(features), width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    labels = torch.full_like(ids, -100)
    for i, f in enumerate(features):
        n = len(f["input_ids"])
        ids[i, :n] = torch.tensor(f["input_ids"])
        mask[i, :n] = 1
        labels[i, :n] = ids[i, :n]
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


@pytest.mark.parametrize("family", ["llama", "qwen2"])
@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_packed_loss_equals_padded_loss(family, attention):
    model = tiny_model(family, attention).eval()
    features = rows([5, 17, 3, 11, 8])
    packed = fastcollate.DataCollatorWithFlattening()(features)
    assert set(packed) == {"input_ids", "labels", "position_ids"}
    with torch.no_grad():
        packed_loss = model(**packed).loss.item()
        padded_loss = model(**padded(features)).loss.item()
        # Without position_ids the sequences attend to each other: the comparison can fail.
        leaking = model(input_ids=packed["input_ids"], labels=packed["labels"]).loss.item()
    assert packed_loss == pytest.approx(padded_loss, rel=1e-5, abs=1e-6)
    assert abs(leaking - padded_loss) > 1e-4


def test_training_arguments_validate_the_budget(tmp_path):
    with pytest.raises(ValueError, match="max_tokens_per_batch"):
        fastcollate.TrainingArguments(
            output_dir=str(tmp_path), train_sampling_strategy="packed", use_cpu=True
        )
    with pytest.raises(ValueError, match="applies to train_sampling_strategy='packed' only"):
        fastcollate.TrainingArguments(
            output_dir=str(tmp_path), max_tokens_per_batch=64, use_cpu=True
        )
    args = fastcollate.TrainingArguments(
        output_dir=str(tmp_path),
        train_sampling_strategy="packed",
        max_tokens_per_batch=64,
        use_cpu=True,
    )
    assert isinstance(args, transformers.TrainingArguments)


class RecordingTrainer(fastcollate.Trainer):
    def compute_loss(self, model, inputs, *args, **kwargs):
        self.seen.append({key: value for key, value in inputs.items()})
        return super().compute_loss(model, inputs, *args, **kwargs)


def packed_trainer(tmp_path, dataset, budget, **overrides):
    settings = dict(
        output_dir=str(tmp_path),
        train_sampling_strategy="packed",
        max_tokens_per_batch=budget,
        num_train_epochs=3,
        logging_steps=1,
        learning_rate=3e-3,
        seed=0,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        disable_tqdm=True,
    )
    settings.update(overrides)
    args = fastcollate.TrainingArguments(**settings)
    trainer = RecordingTrainer(model=tiny_model(), args=args, train_dataset=dataset)
    trainer.seen = []
    return trainer


@pytest.mark.slow
def test_fine_tune_packed_padding_free(tmp_path):
    sequences = counting_rows(60)
    dataset = datasets.Dataset.from_dict({"input_ids": sequences})
    trainer = packed_trainer(tmp_path, dataset, budget=128)
    assert isinstance(trainer.data_collator, fastcollate.DataCollatorWithFlattening)
    sampler = trainer._get_train_sampler()
    assert isinstance(sampler, fastcollate.PackedBatchSampler)
    assert sampler.max_tokens == 128
    assert sampler.lengths.tolist() == [len(s) for s in sequences]
    loader = trainer.get_train_dataloader()
    assert isinstance(loader.dataset, fastcollate.ArrowBatches)
    trainer.train()

    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert len(losses) == len(trainer.seen) >= 3 * len(sampler) - 3
    assert all(math.isfinite(loss) for loss in losses)
    assert sum(losses[-3:]) < 0.8 * sum(losses[:3])  # it learns (4.6 -> 3.2 here)
    known = {tuple(s): i for i, s in enumerate(sequences)}
    for batch in trainer.seen:
        ids = batch["input_ids"]
        assert ids.shape[0] == 1 and ids.shape[1] <= 128
        assert "attention_mask" not in batch
        positions = batch["position_ids"][0].tolist()
        starts = [k for k, p in enumerate(positions) if p == 0] + [len(positions)]
        for a, b in zip(starts[:-1], starts[1:], strict=True):
            assert tuple(ids[0, a:b].tolist()) in known  # whole sequences, position ids reset


def test_packing_truncation(tmp_path):
    sequences = counting_rows(20) + [[1 + k % (VOCAB - 1) for k in range(90)]]
    dataset = datasets.Dataset.from_dict({"input_ids": sequences})
    with pytest.raises(ValueError, match="sequence 20 has 90 tokens, more than max_tokens=64"):
        packed_trainer(tmp_path, dataset, budget=64).get_train_dataloader()
    trainer = packed_trainer(
        tmp_path, dataset, budget=64, packing_truncation=True, max_steps=1
    )
    widths = [batch["input_ids"].shape[1] for batch in trainer.get_train_dataloader()]
    assert max(widths) == 64
    assert sum(widths) == sum(min(len(s), 64) for s in sequences)
