"""fastcollate.Trainer given a stream (`datasets.IterableDataset` from `to_iterable_dataset()` or
loaded from local Parquet and JSON files with `streaming=True`, a torch `IterableDataset`):
the packed strategy packs it on the fly (`PackedStream`), every batch within the budget;
group_by_length groups it on the fly (`LengthGroupedStream`); the buffer fields reach both; a
map-style dataset without a length still raises; batch_rebalance on a training stream and
group_by_length on an evaluation stream warn, once."""

from __future__ import annotations

import warnings

import datasets
import pytest
import torch

import fastcollate
from tests.support.streams import local_stream
from tests.support.tiny_models import VOCAB, counting_rows, tiny_model


def arguments(tmp_path, strategy, **overrides):
    settings = dict(
        output_dir=str(tmp_path),
        train_sampling_strategy=strategy,
        per_device_train_batch_size=4,
        per_device_eval_batch_size=4,
        max_steps=2,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        disable_tqdm=True,
    )
    if strategy == "packed":
        settings["max_tokens_per_batch"] = 64
    settings.update(overrides)
    return fastcollate.TrainingArguments(**settings)


def equal_rows(n=24, width=8):
    """Rows of one length, so that the default collator needs no tokenizer."""
    ids = [[1 + (i + k) % (VOCAB - 1) for k in range(width)] for i in range(n)]
    return datasets.Dataset.from_dict({"input_ids": ids, "labels": ids})


class PlainStream(torch.utils.data.IterableDataset):
    def __init__(self, dataset):
        self.dataset = dataset

    def __iter__(self):
        return iter(self.dataset)


class RecordingTrainer(fastcollate.Trainer):
    def compute_loss(self, model, inputs, *args, **kwargs):
        self.seen.append((inputs["input_ids"][0].tolist(), inputs["position_ids"][0].tolist()))
        return super().compute_loss(model, inputs, *args, **kwargs)


def rows_seen(batches, sequences):
    """The dataset rows in flattened batches (position ids restart at each row)."""
    row_of = {tuple(s): i for i, s in enumerate(sequences)}
    found = []
    for ids, positions in batches:
        starts = [k for k, p in enumerate(positions) if p == 0] + [len(positions)]
        found += [row_of[tuple(ids[a:b])] for a, b in zip(starts[:-1], starts[1:], strict=True)]
    return found


def training_stream(kind, dataset, tmp_path):
    """`dataset` as a training stream: `to_iterable_dataset` in two shards ("datasets"), a
    torch `IterableDataset` ("torch"), or read back from a local "parquet" or "json" file with
    `load_dataset(..., streaming=True)`."""
    if kind == "datasets":
        return dataset.to_iterable_dataset(num_shards=2)
    if kind == "torch":
        return PlainStream(dataset)
    return local_stream(tmp_path, kind, dataset)


STREAM_KINDS = ["datasets", "torch", "parquet", "json"]


@pytest.mark.slow
@pytest.mark.parametrize("kind", STREAM_KINDS)
def test_packed_stream_trains_within_the_budget(tmp_path, kind):
    sequences = counting_rows(40)
    stream = training_stream(kind, datasets.Dataset.from_dict({"input_ids": sequences}), tmp_path)
    args = arguments(tmp_path, "packed", max_steps=30)
    trainer = RecordingTrainer(model=tiny_model(), args=args, train_dataset=stream)
    trainer.seen = []
    loader = trainer.get_train_dataloader()
    assert isinstance(loader.dataset, fastcollate.PackedStream)
    assert loader.dataset.max_tokens == 64 and loader.dataset.seed == args.seed
    per_epoch = []
    for epoch in range(2):
        alone = fastcollate.PackedStream(stream, 64, seed=args.seed)
        alone.set_epoch(epoch)
        per_epoch.append(len(list(alone)))
    trainer.train()
    assert len(trainer.seen) == 30 > sum(per_epoch)
    assert all(len(ids) <= 64 for ids, _ in trainer.seen)
    # Each epoch every row once; the second epoch packs differently (set_epoch reached it).
    first = rows_seen(trainer.seen[: per_epoch[0]], sequences)
    second = rows_seen(trainer.seen[per_epoch[0]: per_epoch[0] + per_epoch[1]], sequences)
    assert sorted(first) == sorted(second) == list(range(len(sequences)))
    assert first != second


@pytest.mark.parametrize("make_stream", [lambda d: d.to_iterable_dataset(), PlainStream],
                         ids=["datasets", "torch"])
def test_packed_stream_set_later_is_packed(tmp_path, make_stream):
    dataset = datasets.Dataset.from_dict({"input_ids": counting_rows(40)})
    trainer = fastcollate.Trainer(model=tiny_model(), args=arguments(tmp_path, "packed"),
                                  train_dataset=dataset)
    trainer.train_dataset = make_stream(dataset)
    loader = trainer.get_train_dataloader()
    assert isinstance(loader.dataset, fastcollate.PackedStream)
    assert all(batch["input_ids"].shape[1] <= 64 for batch in loader)


def test_packed_stream_truncation(tmp_path):
    sequences = counting_rows(10) + [[1 + k % (VOCAB - 1) for k in range(91)]]
    stream = datasets.Dataset.from_dict({"input_ids": sequences}).to_iterable_dataset()
    trainer = fastcollate.Trainer(model=tiny_model(), args=arguments(tmp_path, "packed"),
                                  train_dataset=stream)
    with pytest.raises(ValueError, match="row 10 of the stream has 91 tokens in 'input_ids', "
                                         "more than max_tokens=64"):
        list(trainer.get_train_dataloader())
    args = arguments(tmp_path, "packed", packing_truncation=True)
    trainer = fastcollate.Trainer(model=tiny_model(), args=args, train_dataset=stream)
    widths = [batch["input_ids"].shape[1] for batch in trainer.get_train_dataloader()]
    assert max(widths) == 64
    assert sum(widths) == sum(min(len(s), 64) for s in sequences)


def test_packed_map_style_without_len_raises(tmp_path):
    class NoLength(torch.utils.data.Dataset):
        def __getitem__(self, index):
            return {"input_ids": [1, 2, 3]}

    trainer = fastcollate.Trainer(model=tiny_model(), args=arguments(tmp_path, "packed"),
                                  train_dataset=equal_rows())
    with pytest.raises(ValueError, match=r"a dataset without __len__ \(NoLength\)"):
        trainer._get_train_sampler(NoLength())


def test_packed_eval_stream_is_fine(tmp_path):
    # Evaluation is not packed (eval batches are per_device_eval_batch_size rows), so an
    # evaluation stream loses nothing.
    dataset = datasets.Dataset.from_dict({"input_ids": counting_rows(16)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trainer = fastcollate.Trainer(model=tiny_model(), args=arguments(tmp_path, "packed"),
                                      train_dataset=dataset,
                                      eval_dataset=dataset.to_iterable_dataset())
        assert trainer.evaluate()["eval_loss"] > 0


def stream_warnings(caught):
    return [str(w.message) for w in caught if "is not applied to the" in str(w.message)]


@pytest.mark.parametrize("strategy", ["batch_rebalance"])
def test_length_strategy_on_a_stream_warns_once(tmp_path, strategy):
    stream = equal_rows().to_iterable_dataset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = fastcollate.Trainer(model=tiny_model(), args=arguments(tmp_path, strategy),
                                      train_dataset=stream)
        trainer.train()
        trainer.train()
    assert stream_warnings(caught) == [
        f"train_sampling_strategy='{strategy}' is not applied to the training dataset: it is "
        "a datasets.IterableDataset, which has no length or random access, so its rows are "
        "batched in the order the stream yields them. Use a map-style datasets.Dataset to "
        "sample by length"
    ]
    # It points at the user's Trainer(...) line.
    assert [w.filename for w in caught if "is not applied" in str(w.message)] == [__file__]


def test_group_by_length_on_an_eval_stream_warns_once(tmp_path):
    rows = equal_rows()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = fastcollate.Trainer(model=tiny_model(),
                                      args=arguments(tmp_path, "group_by_length"),
                                      train_dataset=rows,
                                      eval_dataset={"a": PlainStream(rows), "b": rows})
        trainer.evaluate()
        trainer.evaluate()
    found = stream_warnings(caught)
    assert len(found) == 1
    assert found[0].startswith("train_sampling_strategy='group_by_length' is not applied to the "
                               "evaluation dataset: it is a torch IterableDataset (PlainStream)")


def test_map_style_datasets_do_not_warn(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = fastcollate.Trainer(model=tiny_model(),
                                      args=arguments(tmp_path, "group_by_length"),
                                      train_dataset=equal_rows(), eval_dataset=equal_rows())
        trainer.get_train_dataloader()
        trainer.get_eval_dataloader()
    assert stream_warnings(caught) == []


class PaddedRecordingTrainer(fastcollate.Trainer):
    def compute_loss(self, model, inputs, *args, **kwargs):
        mask = inputs["attention_mask"].bool()
        self.seen.append([ids[keep].tolist() for ids, keep in zip(inputs["input_ids"], mask,
                                                                    strict=True)])
        return super().compute_loss(model, inputs, *args, **kwargs)


def row_numbers(batches, sequences):
    row_of = {tuple(s): i for i, s in enumerate(sequences)}
    assert len(row_of) == len(sequences)
    return [[row_of[tuple(ids)] for ids in batch] for batch in batches]


@pytest.mark.slow
@pytest.mark.parametrize("kind", STREAM_KINDS)
def test_group_by_length_stream_trains_on_grouped_batches(tmp_path, kind, bert_tokenizer):
    sequences = counting_rows(40)
    stream = training_stream(kind, datasets.Dataset.from_dict({"input_ids": sequences}), tmp_path)
    args = arguments(tmp_path, "group_by_length", max_steps=20, group_by_length_buffer=16)
    collator = fastcollate.DataCollatorForLanguageModeling(bert_tokenizer, mlm=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "is not applied" warning any more
        trainer = PaddedRecordingTrainer(model=tiny_model(), args=args, data_collator=collator,
                                         train_dataset=stream)
        loader = trainer.get_train_dataloader()
    assert isinstance(loader.dataset, fastcollate.LengthGroupedStream)
    assert (loader.dataset.batch_size, loader.dataset.buffer) == (4, 16)
    trainer.seen = []
    trainer.train()
    # Two epochs of ten batches: the stream's own batches for each epoch (set_epoch reached
    # it), every row once per epoch, the epochs differently grouped.
    expected = []
    for epoch in range(2):
        alone = fastcollate.LengthGroupedStream(stream, 4, buffer=16, seed=args.seed)
        alone.set_epoch(epoch)
        expected.append([[row["input_ids"] for row in batch] for batch in alone])
    assert [len(e) for e in expected] == [10, 10]
    assert trainer.seen == expected[0] + expected[1]
    first, second = (row_numbers(e, sequences) for e in expected)
    assert sorted(sum(first, [])) == sorted(sum(second, [])) == list(range(40))
    assert first != second
    # Grouped: far less padding than batches of four in stream order.
    def pad(batches):
        return sum(len(b) * max(map(len, b)) - sum(map(len, b)) for b in batches)
    in_order = [sequences[i: i + 4] for i in range(0, 40, 4)]
    assert pad(expected[0]) < pad(in_order) / 2


def test_buffer_fields_reach_the_streams(tmp_path):
    dataset = datasets.Dataset.from_dict({"input_ids": counting_rows(40)})
    packed_args = arguments(tmp_path, "packed", packing_buffer=7)
    trainer = fastcollate.Trainer(model=tiny_model(), args=packed_args,
                                  train_dataset=dataset.to_iterable_dataset())
    assert trainer.get_train_dataloader().dataset.buffer == 7
    default = fastcollate.Trainer(model=tiny_model(), args=arguments(tmp_path, "packed"),
                                  train_dataset=dataset.to_iterable_dataset())
    assert default.get_train_dataloader().dataset.buffer == 4096
    grouped = fastcollate.Trainer(
        model=tiny_model(), args=arguments(tmp_path, "group_by_length",
                                           per_device_train_batch_size=5000),
        train_dataset=equal_rows().to_iterable_dataset())
    # The default buffer holds at least one batch.
    assert grouped.get_train_dataloader().dataset.buffer == 5000
    small = fastcollate.Trainer(
        model=tiny_model(), args=arguments(tmp_path, "group_by_length",
                                           group_by_length_buffer=2),
        train_dataset=equal_rows().to_iterable_dataset())
    with pytest.raises(ValueError, match="buffer=2 rows cannot hold one batch of batch_size=4"):
        small.get_train_dataloader()


@pytest.mark.parametrize(
    ("strategy", "overrides", "message"),
    [
        ("packed", {"packing_buffer": 0}, "packing_buffer must be a positive number of rows, "
                                          "not 0"),
        ("packed", {"packing_buffer": True}, "packing_buffer must be a positive number"),
        ("packed", {"packing_buffer": 2.5}, "packing_buffer must be a positive number"),
        ("group_by_length", {"packing_buffer": 8},
         "packing_buffer applies to train_sampling_strategy='packed' only, not "
         "'group_by_length'"),
        ("group_by_length", {"group_by_length_buffer": -1},
         "group_by_length_buffer must be a positive number of rows, not -1"),
        ("random", {"group_by_length_buffer": 8},
         "group_by_length_buffer applies to train_sampling_strategy='group_by_length' only, "
         "not 'random'"),
        ("packed", {"group_by_length_buffer": 8}, "group_by_length_buffer applies to"),
    ],
)
def test_buffer_fields_are_validated(tmp_path, strategy, overrides, message):
    with pytest.raises(ValueError, match=message):
        arguments(tmp_path, strategy, **overrides)


def test_group_by_length_map_style_is_unchanged(tmp_path):
    # A map-style dataset keeps the length-grouped sampler (not a stream).
    trainer = fastcollate.Trainer(model=tiny_model(),
                                  args=arguments(tmp_path, "group_by_length"),
                                  train_dataset=equal_rows())
    loader = trainer.get_train_dataloader()
    assert not isinstance(loader.dataset, fastcollate.LengthGroupedStream)
    assert isinstance(trainer._get_train_sampler(), fastcollate.LengthGroupedSampler)
