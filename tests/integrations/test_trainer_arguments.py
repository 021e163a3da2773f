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
