"""fastcollate.Trainer leaves the caller's TrainingArguments as they are, even while it builds a
DataLoader (it turns the DataLoader's own pinning off through a copy of them): no attribute of
them is set (spied on by a `__setattr__`), and the DataLoader is built as before."""

from __future__ import annotations

import datasets
import pytest
import torch
from transformers import AutoModelForSequenceClassification

import fastcollate

pytestmark = pytest.mark.parity

SETS: dict[int, list[str]] = {}


class SpiedArguments(fastcollate.TrainingArguments):
    def __setattr__(self, name, value):
        if id(self) in SETS:
            SETS[id(self)].append(name)
        super().__setattr__(name, value)


def test_building_dataloaders_sets_nothing_on_the_arguments(model_path, bert_tokenizer, tmp_path):
    texts = [f"sentence {i} " * (1 + i % 4) for i in range(12)]
    train = datasets.Dataset.from_dict({"text": texts, "label": [i % 2 for i in range(12)]})
    train = train.map(lambda batch: bert_tokenizer(batch["text"]), batched=True,
                      remove_columns=["text"])
    args = SpiedArguments(output_dir=str(tmp_path), per_device_train_batch_size=4,
                          report_to=[], dataloader_num_workers=0)
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(model_path, num_labels=2)
    trainer = fastcollate.Trainer(model, args, train_dataset=train, eval_dataset=train,
                                  processing_class=bert_tokenizer)
    SETS[id(args)] = sets = []
    assert args.dataloader_pin_memory is True  # asked for: turned off for the DataLoader only
    loaders = [trainer.get_train_dataloader(), trainer.get_eval_dataloader()]
    assert sets == []
    assert trainer.args is args
    assert args.dataloader_pin_memory is True
    for loader, size in zip(loaders, (4, 8), strict=True):
        # No accelerator here: the DataLoader is asked for no pinning (torch would warn).
        assert loader.pin_memory is False
        assert next(iter(loader))["input_ids"].shape[0] == size


@pytest.mark.parametrize("kind", ["DatasetDict", "IterableDatasetDict"])
@pytest.mark.parametrize("trainer_cls", [fastcollate.Trainer, fastcollate.Seq2SeqTrainer])
def test_a_dataset_of_splits_is_refused_at_construction(trainer_cls, kind, model_path, tmp_path):
    # transformers keeps it and fails at train() with datasets' KeyError; here the message
    # names the splits and the fix, before anything is built from it.
    split = datasets.Dataset.from_dict({"input_ids": [[1, 2]], "label": [0]})
    if kind == "IterableDatasetDict":
        split = split.to_iterable_dataset()
    splits = getattr(datasets, kind)({"train": split, "test": split})
    model = AutoModelForSequenceClassification.from_pretrained(model_path, num_labels=2)
    args = fastcollate.TrainingArguments(str(tmp_path), report_to=[], use_cpu=True)
    with pytest.raises(ValueError) as raised:
        trainer_cls(model=model, args=args, train_dataset=splits)
    assert str(raised.value) == (
        f"train_dataset is a datasets.{kind} (splits: 'train', 'test'), not a dataset; pass "
        "one split, e.g. train_dataset=dataset['train']"
    )


def test_an_eval_dataset_of_splits_is_evaluated_split_by_split(model_path, tmp_path):
    # transformers and TRL take a dict of eval datasets (a DatasetDict is one): kept as there.
    split = datasets.Dataset.from_dict({"input_ids": [[101, 7, 102]] * 2, "label": [0, 1]})
    model = AutoModelForSequenceClassification.from_pretrained(model_path, num_labels=2)
    args = fastcollate.TrainingArguments(str(tmp_path), report_to=[], use_cpu=True)
    trainer = fastcollate.Trainer(
        model=model, args=args, eval_dataset=datasets.DatasetDict({"a": split, "b": split})
    )
    metrics = trainer.evaluate()
    assert "eval_a_loss" in metrics and "eval_b_loss" in metrics
