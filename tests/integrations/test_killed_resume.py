"""Exact resume after a kill, on map-style datasets and streams alike: `fastcollate.Trainer`
training a tiny BERT on a `datasets.Dataset` (or the same rows as a stream,
`to_iterable_dataset`) with seeded MLM masks and evaluation inside the epoch, killed (an exception)
after a step, inside an evaluation or at an epoch's end and resumed from its newest checkpoint
(`resume_from_checkpoint=True`), trains on the batches of the uninterrupted run, masks
included, and ends with its weights: random, group_by_length, sequential and batch_rebalance
sampling, gradient accumulation, DataLoader workers, and the seeded collator wrapped in a class,
a partial or a lambda. Evaluation never changes the training masks, wherever the seeded
collator sits."""

from __future__ import annotations

import functools
import random
from pathlib import Path

import datasets
import pytest
import torch
import transformers

import fastcollate

pytestmark = pytest.mark.slow

ROWS = 24
BATCH = 4
EPOCHS = 2


class Killed(Exception):
    """The job dying."""


class Kill(transformers.TrainerCallback):
    """Raises in `hook` once the trainer is at `step`: after the step (on_step_end: before its
    checkpoint is written), inside the evaluation at that step (on_prediction_step), or right
    after its checkpoint (on_save)."""

    def __init__(self, hook, step):
        self.step = step
        setattr(self, hook, self._maybe_kill)

    def _maybe_kill(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            raise Killed(self.step)


class Recording(fastcollate.Trainer):
    def compute_loss(self, model, inputs, *args, **kwargs):
        if model.training:
            self.seen.append((inputs["input_ids"].tolist(), inputs["labels"].tolist()))
        return super().compute_loss(model, inputs, *args, **kwargs)


class Delegating:
    """A user's collator that hands its rows to the seeded MLM collator."""

    def __init__(self, inner):
        self.inner = inner

    def __call__(self, features):
        return self.inner([dict(f) for f in features])


def mask_with(collator, features):
    return collator(features)


def collator_of(kind, tokenizer):
    mlm = fastcollate.DataCollatorForLanguageModeling(tokenizer, seed=5)
    if kind == "bare":
        return mlm
    if kind == "wrapped":
        return Delegating(mlm)
    if kind == "partial":
        return functools.partial(mask_with, mlm)
    assert kind == "lambda"
    return lambda features: mlm(features)


def rows(n, seed):
    generator = random.Random(seed)
    return [[101, *(generator.randrange(1000, 3000) for _ in range(generator.randrange(3, 20))),
             102] for _ in range(n)]


def tiny_bert(tokenizer):
    config = transformers.BertConfig(
        vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=16, max_position_embeddings=64,
        # No dropout: its generator is transformers' (evaluation's DataLoaders draw from it);
        # what is compared here is the data.
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    return transformers.BertForMaskedLM(config)


def train(out, tokenizer, *, collator="bare", strategy="random", accumulation=1, workers=0,
          evaluate=True, kill=None, resume=False, context=None, stream=False):
    train_dataset = datasets.Dataset.from_dict({"input_ids": rows(ROWS, 1)})
    if stream:  # a stream has no length: as many steps as the map-style run's epochs make
        train_dataset = train_dataset.to_iterable_dataset(num_shards=2)
        length = {"max_steps": EPOCHS * ROWS // BATCH // accumulation}
    else:
        length = {"num_train_epochs": EPOCHS}
    args = fastcollate.TrainingArguments(
        output_dir=str(out), per_device_train_batch_size=BATCH, per_device_eval_batch_size=2,
        gradient_accumulation_steps=accumulation, **length,
        train_sampling_strategy=strategy, dataloader_num_workers=workers, seed=3,
        dataloader_multiprocessing_context=context,
        learning_rate=1e-2, report_to="none", use_cpu=True, disable_tqdm=True,
        save_strategy="steps" if kill or resume else "no", save_steps=1,
        eval_strategy="steps" if evaluate else "no", eval_steps=2)
    trainer = Recording(
        model=tiny_bert(tokenizer), args=args, data_collator=collator_of(collator, tokenizer),
        train_dataset=train_dataset,
        eval_dataset=datasets.Dataset.from_dict({"input_ids": rows(6, 2)}),
        callbacks=[Kill(*kill)] if kill else None)
    trainer.seen = []
    if kill:
        with pytest.raises(Killed):
            trainer.train()
    else:
        trainer.train(resume_from_checkpoint=True if resume else None)
    return trainer


def newest_checkpoint(out: Path) -> int:
    return max(int(p.name.split("-")[1]) for p in out.glob("checkpoint-*"))


def assert_same_weights(ours, theirs):
    for (name, a), b in zip(ours.model.state_dict().items(), theirs.model.state_dict().values(),
                            strict=True):
        assert torch.equal(a, b), name


def kill_points(accumulation, seed):
    """After a random step, inside a random evaluation, and right after epoch 0's last step."""
    steps = ROWS // BATCH // accumulation
    generator = random.Random(seed)
    return [("on_step_end", generator.randrange(2, steps * EPOCHS)),
            ("on_prediction_step", 2 * generator.randrange(1, steps * EPOCHS // 2)),
            ("on_save", steps)]


def check_resumes(tmp_path, tokenizer, seed, **options):
    full = train(tmp_path / "full", tokenizer, **options)
    accumulation = options.get("accumulation", 1)
    assert len(full.seen) == EPOCHS * ROWS // BATCH
    for hook, step in kill_points(accumulation, seed):
        out = tmp_path / f"{hook}-{step}"
        killed = train(out, tokenizer, kill=(hook, step), **options)
        assert killed.seen == full.seen[:len(killed.seen)]
        saved = newest_checkpoint(out)
        resumed = train(out, tokenizer, resume=True, **options)
        assert resumed.seen == full.seen[saved * accumulation:], (hook, step, saved)
        assert_same_weights(resumed, full)


@pytest.mark.parametrize("strategy", ["random", "group_by_length", "sequential", "batch_rebalance"])
def test_killed_runs_resume_exactly(tmp_path, bert_tokenizer, strategy):
    check_resumes(tmp_path, bert_tokenizer, seed=len(strategy), strategy=strategy)


@pytest.mark.parametrize("strategy", ["random", "group_by_length"])
def test_killed_runs_resume_exactly_on_a_stream(tmp_path, bert_tokenizer, strategy):
    check_resumes(tmp_path, bert_tokenizer, seed=len(strategy) + 1, strategy=strategy,
                  stream=True)


def test_killed_runs_resume_exactly_with_gradient_accumulation(tmp_path, bert_tokenizer):
    check_resumes(tmp_path, bert_tokenizer, seed=7, strategy="group_by_length", accumulation=2)


@pytest.mark.parametrize("collator", ["wrapped", "partial", "lambda"])
def test_killed_runs_resume_exactly_with_a_wrapped_collator(tmp_path, bert_tokenizer, collator):
    check_resumes(tmp_path, bert_tokenizer, seed=11, collator=collator)


@pytest.mark.multiprocess
def test_killed_runs_resume_exactly_with_dataloader_workers(tmp_path, bert_tokenizer):
    check_resumes(tmp_path, bert_tokenizer, seed=13, workers=2, collator="wrapped")


@pytest.mark.parametrize("collator", ["wrapped", "partial", "lambda"])
def test_evaluation_leaves_the_training_masks_as_they_are(tmp_path, bert_tokenizer, collator):
    with_evaluation = train(tmp_path / "a", bert_tokenizer, collator=collator)
    without = train(tmp_path / "b", bert_tokenizer, collator=collator, evaluate=False)
    assert with_evaluation.seen == without.seen
    assert_same_weights(with_evaluation, without)
    # Masked: the comparison is of masks, not of untouched rows.
    assert any(label != -100 for _, labels in without.seen for row in labels for label in row)


@pytest.mark.multiprocess
@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_workers_mask_as_the_main_process(tmp_path, bert_tokenizer, context):
    """A batch's masks are a function of its place, not of the process collating it (spawned
    workers get the collate function pickled)."""
    evaluate = context == "fork"  # spawning evaluation's workers at every evaluation is slow
    main = train(tmp_path / "a", bert_tokenizer, collator="wrapped", evaluate=evaluate)
    workers = train(tmp_path / "b", bert_tokenizer, collator="wrapped", workers=2,
                    context=context, evaluate=evaluate)
    assert main.seen == workers.seen
