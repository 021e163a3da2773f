"""Training on the CPU, `fastcollate.Trainer`'s loaders do not walk each batch with accelerate's
`send_to_device` when it is CPU tensors already (integrations/cpu_batches): the batches, the
loader's `state_dict` after each batch and a resumed loader's batches are those of the loader
that walks them; a batch of anything else is still sent as accelerate sends it; a loader with
workers, pinning or another device is left to accelerate."""

from __future__ import annotations

import copy

import accelerate.data_loader
import datasets
import numpy as np
import pytest
import torch
import transformers
from torch.overrides import TorchFunctionMode

import fastcollate
from fastcollate.integrations import cpu_batches
from fastcollate.integrations import trainer as trainer_module
from tests.support.arrow_parity import imdb_like, tiny_bert
from tests.support.compare import assert_same_batch

datasets.disable_progress_bars()


def make_trainer(tmp_path, tokenizer, collator=None, stateful=False, **arguments):
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), per_device_train_batch_size=8, report_to=[], use_cpu=True,
        **arguments,
    )
    trainer = fastcollate.Trainer(model=tiny_bert(), args=args, train_dataset=imdb_like(rows=44),
                                  data_collator=collator, processing_class=tokenizer)
    if stateful:
        # transformers 5's AcceleratorConfig has no use_stateful_dataloader: set on the
        # accelerator's own configuration (as test_stateful_dataloader does).
        trainer.accelerator.dataloader_config.use_stateful_dataloader = True
    return trainer


class SendCount:
    """Counts the DataLoaderShard's sends."""

    def __init__(self, monkeypatch):
        self.loader = 0
        original = accelerate.data_loader.send_to_device

        def by_loader(*args, **kwargs):
            self.loader += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(accelerate.data_loader, "send_to_device", by_loader)


def run(trainer, monkeypatch, take_over, skip=0):
    """(loader, batches, state_dict after each batch) of the training loader, with the CPU
    send taken over or left to accelerate."""
    # accelerate's seedable sampler takes torch's initial seed when it is made.
    torch.manual_seed(3)
    with monkeypatch.context() as patch:
        if not take_over:
            patch.setattr(trainer_module, "take_over_cpu_placement", lambda loader, collate: None)
        loader = trainer.get_train_dataloader()
    if skip:
        loader = trainer.accelerator.skip_first_batches(loader, skip)
    torch.manual_seed(3)
    batches, states = [], []
    for batch in loader:
        batches.append(batch)
        # (A plain DataLoader under accelerate has no state_dict.)
        if hasattr(loader.base_dataloader, "state_dict"):
            states.append(copy.deepcopy(loader.state_dict()))
    return loader, batches, states


def assert_same_batches(ours, theirs):
    assert len(ours) == len(theirs) > 0
    for a, b in zip(ours, theirs, strict=True):
        assert type(a) is type(b)
        assert_same_batch(dict(a), dict(b))


@pytest.mark.parametrize("stateful", [False, True])
def test_cpu_batches_are_not_walked_and_nothing_else_changes(bert_tokenizer, tmp_path,
                                                             monkeypatch, stateful):
    trainer = make_trainer(tmp_path, bert_tokenizer, stateful=stateful)
    counts = SendCount(monkeypatch)
    loader, theirs, their_states = run(trainer, monkeypatch, take_over=False)
    assert loader.device == torch.device("cpu") and counts.loader == len(theirs)
    counts.loader = 0
    loader, ours, our_states = run(trainer, monkeypatch, take_over=True)
    assert loader.device is None and counts.loader == 0
    assert_same_batches(ours, theirs)
    assert isinstance(ours[0], transformers.BatchEncoding)
    assert our_states == their_states
    assert len(our_states) == (len(ours) if stateful else 0)
    if stateful:
        assert type(loader.base_dataloader).__name__ == "StatefulDataLoader"


def test_a_resumed_loader_skips_the_same_batches(bert_tokenizer, tmp_path, monkeypatch):
    trainer = make_trainer(tmp_path, bert_tokenizer)
    loader, theirs, _ = run(trainer, monkeypatch, take_over=False, skip=2)
    assert loader.device == torch.device("cpu")
    loader, ours, _ = run(trainer, monkeypatch, take_over=True, skip=2)
    assert loader.device is None  # accelerate's skipping loader copies the device
    assert_same_batches(ours, theirs)


class Recorder:
    """A batch accelerate sends through its own `.to`."""

    def __init__(self):
        self.sent = []

    def to(self, device, non_blocking=False):
        self.sent.append((device, non_blocking))
        return self


class Mapping(dict):
    pass


@pytest.mark.parametrize("kind", ["recorder", "dict subclass", "numpy", "tensor subclass"])
def test_any_other_batch_is_still_sent(bert_tokenizer, tmp_path, monkeypatch, kind):
    def collate(rows):
        if kind == "recorder":
            return Recorder()
        ids = torch.tensor([row["label"] for row in rows])
        if kind == "dict subclass":
            return Mapping(labels=ids)
        if kind == "numpy":
            return {"labels": ids, "extra": np.zeros(2)}
        return {"labels": torch.nn.Parameter(ids.float(), requires_grad=False)}

    trainer = make_trainer(tmp_path, bert_tokenizer, collator=collate)
    results = []
    for take_over in (False, True):
        loader, batches, _ = run(trainer, monkeypatch, take_over=take_over)
        assert (loader.device is None) == take_over
        results.append(batches)
    theirs, ours = results
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs, strict=True):
        assert type(a) is type(b)
        if kind == "recorder":
            assert a.sent == b.sent == [(torch.device("cpu"), False)]
        else:
            assert list(a) == list(b)
            for key in a:
                assert type(a[key]) is type(b[key])
                assert np.array_equal(np.asarray(a[key]), np.asarray(b[key]))


def test_loaders_with_workers_or_pinning_are_left_to_accelerate(bert_tokenizer, tmp_path):
    trainer = make_trainer(tmp_path, bert_tokenizer, dataloader_num_workers=1)
    assert trainer.get_train_dataloader().device == torch.device("cpu")
    loader = accelerate.data_loader.prepare_data_loader(
        torch.utils.data.DataLoader(list(range(8)), batch_size=2, pin_memory=True),
        torch.device("cpu"), put_on_device=True)
    placed = cpu_batches_collate()
    cpu_batches.take_over_cpu_placement(loader, placed)
    assert loader.device == torch.device("cpu") and placed.send_to is None


def cpu_batches_collate():
    from fastcollate.integrations.batch_places import TRAIN, LoaderPlaces, PlacedCollate

    return PlacedCollate(lambda rows: rows, TRAIN, LoaderPlaces(), map_style=True)


def test_another_device_keeps_accelerates_move():
    # On a GPU the one host-to-device move stays in the loader (a device that is not the CPU,
    # here "meta", which nothing is sent to in this test).
    loader = accelerate.data_loader.prepare_data_loader(
        torch.utils.data.DataLoader(list(range(8)), batch_size=2),
        torch.device("meta"), put_on_device=True)
    placed = cpu_batches_collate()
    cpu_batches.take_over_cpu_placement(loader, placed)
    assert loader.device == torch.device("meta") and placed.send_to is None


class Passing(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def test_already_on_cpu():
    ids = torch.zeros(2, 3, dtype=torch.int64)
    encoding = transformers.BatchEncoding({"input_ids": ids, "n": 3})
    assert cpu_batches.already_on_cpu(encoding)
    assert cpu_batches.already_on_cpu({"input_ids": ids})
    assert not cpu_batches.already_on_cpu(Mapping(input_ids=ids))
    assert not cpu_batches.already_on_cpu({"input_ids": ids.to("meta")})
    assert not cpu_batches.already_on_cpu({"input_ids": ids.numpy()})
    assert not cpu_batches.already_on_cpu({"input_ids": [ids]})
    assert not cpu_batches.already_on_cpu([ids])
    with Passing():
        assert not cpu_batches.already_on_cpu({"input_ids": ids})
