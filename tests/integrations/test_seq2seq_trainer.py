"""`fastcollate.Seq2SeqTrainer` against `transformers.Seq2SeqTrainer` on a tiny T5: the same
losses step by step, the same evaluation loss and the same generated predictions
(`predict_with_generate`), with batches read straight from Arrow; the default collator chosen
as transformers chooses its own."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers
from datasets import Dataset

import fastcollate
from fastcollate.arrow import ArrowBatches
from tests.support.seeded_grouping import SeededSeq2SeqTrainer

pytestmark = [pytest.mark.parity, pytest.mark.slow]


def tiny_t5():
    torch.manual_seed(0)
    config = transformers.T5Config(vocab_size=64, d_model=16, d_ff=32, num_layers=1,
                                   num_decoder_layers=1, num_heads=2, d_kv=8,
                                   decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    return transformers.T5ForConditionalGeneration(config)


def pairs(n=24, seed=0):
    rng = np.random.default_rng(seed)
    sources = [rng.integers(2, 64, rng.integers(3, 15)).tolist() for _ in range(n)]
    targets = [s[::-1][: rng.integers(2, 9)] + [1] for s in sources]
    return Dataset.from_dict({"input_ids": sources, "labels": targets})


def arguments(tmp_path, **overrides):
    settings = dict(output_dir=str(tmp_path), per_device_train_batch_size=4,
                    per_device_eval_batch_size=5, max_steps=8, logging_steps=1,
                    learning_rate=1e-2, report_to="none", use_cpu=True, save_strategy="no",
                    disable_tqdm=True, seed=3, predict_with_generate=True,
                    generation_max_length=10)
    settings.update(overrides)
    return transformers.Seq2SeqTrainingArguments(**settings)


def run(trainer_class, collator_class, tokenizer, tmp_path, **overrides):
    model = tiny_t5()
    data = pairs()
    trainer = trainer_class(model=model, args=arguments(tmp_path, **overrides),
                            data_collator=collator_class(tokenizer, model=model),
                            train_dataset=data, eval_dataset=pairs(11, seed=1),
                            processing_class=tokenizer)
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    metrics = trainer.evaluate()
    predictions = trainer.predict(pairs(7, seed=2))
    return trainer, losses, metrics, predictions


@pytest.mark.parametrize("strategy", ["random", "group_by_length"])
def test_same_losses_and_generations_as_transformers(bert_tokenizer, tmp_path, strategy):
    ours, losses, metrics, predictions = run(
        fastcollate.Seq2SeqTrainer, fastcollate.DataCollatorForSeq2Seq, bert_tokenizer,
        tmp_path / "ours", train_sampling_strategy=strategy)
    # SeededSeq2SeqTrainer: group_by_length shuffled from seed + epoch, as fastcollate's.
    _, their_losses, their_metrics, their_predictions = run(
        SeededSeq2SeqTrainer, transformers.DataCollatorForSeq2Seq, bert_tokenizer,
        tmp_path / "theirs", train_sampling_strategy=strategy)
    assert len(losses) == 8
    assert losses == their_losses
    assert metrics["eval_loss"] == their_metrics["eval_loss"]
    np.testing.assert_array_equal(predictions.predictions, their_predictions.predictions)
    np.testing.assert_array_equal(predictions.label_ids, their_predictions.label_ids)
    assert predictions.predictions.shape[0] == 7
    # The batches came straight from Arrow.
    assert isinstance(ours._remove_unused_columns(pairs()), ArrowBatches)


def test_default_collator_is_chosen_as_transformers_does(bert_tokenizer, tmp_path):
    args = arguments(tmp_path)
    ours = fastcollate.Seq2SeqTrainer(model=tiny_t5(), args=args, processing_class=bert_tokenizer)
    theirs = transformers.Seq2SeqTrainer(model=tiny_t5(), args=args,
                                         processing_class=bert_tokenizer)
    assert type(theirs.data_collator) is transformers.DataCollatorWithPadding
    assert type(ours.data_collator) is fastcollate.DataCollatorWithPadding
    bare = fastcollate.Seq2SeqTrainer(model=tiny_t5(), args=args)
    assert bare.data_collator is fastcollate.default_data_collator
    assert isinstance(ours, transformers.Seq2SeqTrainer)
