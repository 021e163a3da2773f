"""The Arrow path (ArrowBatches / ArrowBatch) against the row path: for hypothesis-generated
`datasets.Dataset`s (value dtypes, list kinds, chunking, shuffle / select / filter / sort,
empty sequences, every padding option) a batch collated straight from Arrow must equal, bit for
bit, what the same fastcollate collator gives for the rows `datasets` returns, and what
transformers' collator gives for those rows. Also: DataLoader with worker processes (fork and
spawn), nulls, bad indices, column selection and the Trainer hook."""

from __future__ import annotations

import copy
import multiprocessing
import pickle

import datasets
import numpy as np
import pyarrow as pa
import pytest
import torch
import transformers
from datasets.table import InMemoryTable
from hypothesis import assume, given
from hypothesis import strategies as st
from torch.utils.data import DataLoader

import fastcollate
from fastcollate import ArrowBatch, ArrowBatches
from fastcollate.arrow.trainer_datasets import unwrap, wrap_for_trainer
from tests.support.arrow_datasets import INT_TYPES, sequence_feature, transformed
from tests.support.arrow_parity import (
    FLOAT_TYPES,
    MASK_KEYS,
    SETTINGS,
    assert_arrow_equals_rows,
    batch_of,
    imdb_like,
    padded_datasets,
    padding_options,
    tiny_bert,
)
from tests.support.compare import assert_same_batch, assert_same_value, has_object_array
from tests.support.seeded_grouping import SeededTrainer

pytestmark = pytest.mark.parity

datasets.disable_progress_bars()

def assert_same_as_transformers(ours, theirs_fn, rows, must_fail):
    """Where transformers fails, or builds an object array, fastcollate raises (as its row-path
    tests establish); else the outputs are identical."""
    try:
        theirs = theirs_fn(copy.deepcopy(rows))
        theirs_failed = has_object_array(theirs)
    except (ValueError, TypeError, RuntimeError):
        theirs_failed = True
    if theirs_failed or must_fail:
        assert ours is None
    else:
        assert ours is not None
        assert_same_batch(ours, theirs)


def must_fail(rows, options, tokenizer):
    """fastcollate raises where transformers silently misbehaves: rows longer than max_length
    (transformers leaves them unpadded) and ragged rows left unpadded (see test_pad_parity)."""
    padding = options.get("padding", True)
    lengths = [len(r["input_ids"]) for r in rows]
    if padding == "max_length":
        limit = options.get("max_length")
        if limit is None:
            limit = tokenizer.model_max_length
        multiple = options.get("pad_to_multiple_of")
        if multiple and limit % multiple:
            limit = (limit // multiple + 1) * multiple
        return max(lengths) > limit
    if padding in (False, "do_not_pad"):
        return options.get("return_tensors", "pt") is not None and len(set(lengths)) > 1
    return False


@SETTINGS
@given(
    case=padded_datasets(),
    options=padding_options,
    side=st.sampled_from(["left", "right"]),
    return_tensors=st.sampled_from(["pt", "np", None]),
)
def test_data_collator_with_padding_arrow_equals_rows(
    bert_tokenizer, case, options, side, return_tensors
):
    dataset, indices = case
    tokenizer = copy.copy(bert_tokenizer)
    tokenizer.padding_side = side
    options = {**options, "return_tensors": return_tensors}
    batch, rows = batch_of(dataset, indices)
    assert "text" not in batch.columns and "order" in batch.columns
    ours = assert_arrow_equals_rows(
        fastcollate.DataCollatorWithPadding(tokenizer, **options), batch, rows
    )
    if return_tensors is not None:
        assert_same_as_transformers(
            ours,
            transformers.DataCollatorWithPadding(tokenizer, **options),
            rows,
            must_fail(rows, options, tokenizer),
        )


@SETTINGS
@given(
    case=padded_datasets(),
    options=padding_options,
    side=st.sampled_from([None, "left", "right"]),
    return_attention_mask=st.sampled_from([None, True, False]),
    return_tensors=st.sampled_from(["pt", "np", None]),
    pad_token_id=st.integers(0, 3),
)
def test_pad_arrow_equals_rows(
    bert_tokenizer, case, options, side, return_attention_mask, return_tensors, pad_token_id
):
    dataset, indices = case
    options = {
        **options,
        "padding_side": side,
        "return_attention_mask": return_attention_mask,
        "return_tensors": return_tensors,
    }
    batch, rows = batch_of(dataset, indices, ["input_ids", *(
        k for k in MASK_KEYS if k in dataset.column_names)])
    # With the tokenizer, and with keyword settings (another pad id).
    ours = assert_arrow_equals_rows(
        lambda b: fastcollate.pad(b, bert_tokenizer, **options), batch, rows
    )
    assert_same_as_transformers(
        ours,
        lambda r: bert_tokenizer.pad(r, **options),
        rows,
        must_fail(rows, options, bert_tokenizer),
    )
    assert_arrow_equals_rows(
        lambda b: fastcollate.pad(b, pad_token_id=pad_token_id, **options), batch, rows
    )


@st.composite
def equal_length_datasets(draw):
    """Datasets default_data_collator stacks: equal-length sequences and scalars."""
    rows = draw(st.integers(1, 8))
    length = draw(st.integers(0, 5))
    # Arrow has no fixed-size list of size 0.
    list_kind = draw(st.sampled_from(["list", "large_list", "fixed"] if length else ["list"]))
    ids_type = draw(st.sampled_from(INT_TYPES + FLOAT_TYPES))
    label = draw(st.sampled_from([None, "int64", "float32", "bool", "label_ids"]))
    ids = st.lists(st.integers(0, 100), min_size=length, max_size=length)
    data = {"input_ids": [draw(ids) for _ in range(rows)]}
    features = {"input_ids": sequence_feature(ids_type, list_kind, length)}
    if label == "label_ids":
        data["label_ids"] = [draw(ids) for _ in range(rows)]
        features["label_ids"] = sequence_feature("int32", list_kind, length)
    elif label is not None:
        values = {"int64": st.integers(0, 9), "bool": st.booleans()}.get(
            label, st.floats(-1, 1, width=32)
        )
        data["label"] = draw(st.lists(values, min_size=rows, max_size=rows))
        features["label"] = datasets.Value(label)
    data["score"] = draw(st.lists(st.floats(-5, 5, width=32), min_size=rows, max_size=rows))
    features["score"] = datasets.Value("float32")
    data["order"] = list(range(rows))
    features["order"] = datasets.Value("uint8")
    dataset = draw(transformed(data, datasets.Features(features)))
    indices = draw(st.lists(st.integers(0, len(dataset) - 1), min_size=1, max_size=5))
    return dataset, indices


@SETTINGS
@given(case=equal_length_datasets(), return_tensors=st.sampled_from(["pt", "np"]))
def test_default_data_collator_arrow_equals_rows(case, return_tensors):
    dataset, indices = case
    # transformers (and so the row path) looks at label_ids[0] of row 0: an IndexError.
    assume("label_ids" not in dataset.column_names or len(dataset[0]["label_ids"]) > 0)
    batch, rows = batch_of(dataset, indices)
    for ours_fn, theirs_fn in [
        (
            lambda b: fastcollate.default_data_collator(b, return_tensors),
            lambda r: transformers.default_data_collator(r, return_tensors),
        ),
        (
            fastcollate.DefaultDataCollator(return_tensors=return_tensors),
            transformers.DefaultDataCollator(return_tensors=return_tensors),
        ),
    ]:
        ours = assert_arrow_equals_rows(ours_fn, batch, rows)
        assert_same_as_transformers(ours, theirs_fn, rows, must_fail=False)


@pytest.mark.parametrize(
    ("make", "columns", "libraries"),
    [
        (lambda tok, lib: lib.DataCollatorForTokenClassification(tok), None, "both"),
        (lambda tok, lib: lib.DataCollatorForSeq2Seq(tok), None, "both"),
        (lambda tok, lib: lib.DataCollatorWithFlattening(), None, "both"),
        # transformers' tokenizer.pad wants a list here, not any sequence of rows.
        (lambda tok, lib: lib.DataCollatorForLanguageModeling(tok, mlm=False), ["input_ids"],
         "fastcollate"),
    ],
    ids=["token_classification", "seq2seq", "flattening", "language_modeling"],
)
def test_collators_without_an_arrow_path_take_the_batch_as_rows(
    bert_tokenizer, make, columns, libraries
):
    # The batch is also a sequence of rows, so a collator that iterates its features works on
    # it unchanged (without the speed-up): transformers' here. fastcollate's family collators
    # read it from Arrow instead (tests/arrow/test_arrow_family.py); same batches either way.
    dataset = datasets.Dataset.from_dict(
        {"input_ids": [[101, 5, 102], [101, 102], [101, 7, 8, 102]],
         "labels": [[-100, 3, -100], [-100, -100], [1, 2, 3, 4]]}
    )
    batch, rows = batch_of(dataset, [1, 0, 2], columns)
    for lib in (fastcollate, transformers) if libraries == "both" else (fastcollate,):
        assert_same_batch(make(bert_tokenizer, lib)(batch), make(bert_tokenizer, lib)(rows))


def loader_batches(dataset, collator, **kwargs):
    generator = torch.Generator().manual_seed(7)
    loader = DataLoader(
        dataset, batch_size=5, shuffle=True, generator=generator, collate_fn=collator, **kwargs
    )
    return list(loader)


def assert_same_batches(ours, theirs):
    assert len(ours) == len(theirs) > 0
    for a, b in zip(ours, theirs, strict=True):
        assert_same_batch(dict(a), dict(b))


@pytest.mark.multiprocess
@pytest.mark.skipif(
    "fork" not in multiprocessing.get_all_start_methods(),
    reason="the fork start method is unavailable on this platform",
)
def test_dataloader_with_fork_workers_matches_the_row_path(bert_tokenizer):
    dataset = imdb_like()
    collator = fastcollate.DataCollatorWithPadding(bert_tokenizer, pad_to_multiple_of=8)
    expected = loader_batches(dataset, transformers.DataCollatorWithPadding(
        bert_tokenizer, pad_to_multiple_of=8))
    wrapper = ArrowBatches(dataset)
    wrapper.native_columns()  # a cache built before forking is inherited and stays valid
    ours = loader_batches(wrapper, collator, num_workers=2, multiprocessing_context="fork")
    assert_same_batches(ours, expected)
    assert_same_batches(loader_batches(ArrowBatches(dataset), collator), expected)


@pytest.mark.multiprocess
def test_dataloader_with_a_spawn_worker_matches_the_row_path(bert_tokenizer, tmp_path):
    # Memory-mapped, as a dataset from the Hub cache is: the worker maps the file again.
    imdb_like(rows=20).flatten_indices().save_to_disk(str(tmp_path / "mapped"))
    dataset = datasets.load_from_disk(str(tmp_path / "mapped")).select(range(2, 19))
    assert dataset.cache_files
    collator = fastcollate.DataCollatorWithPadding(bert_tokenizer)
    expected = loader_batches(dataset, collator)
    ours = loader_batches(
        ArrowBatches(dataset), collator, num_workers=1, multiprocessing_context="spawn"
    )
    assert_same_batches(ours, expected)


def test_wrapper_and_batch_pickle_without_their_cache(bert_tokenizer):
    wrapper = ArrowBatches(imdb_like(rows=10))
    batch = wrapper.__getitems__([3, 1])
    collator = fastcollate.DataCollatorWithPadding(bert_tokenizer)
    expected = collator(batch)
    restored = pickle.loads(pickle.dumps(batch))
    assert isinstance(restored, ArrowBatch) and restored.indices == [3, 1]
    assert restored.source._cache == {}
    assert_same_batch(collator(restored), expected)
    assert len(wrapper) == 10 and wrapper[3] == batch.rows()[0]


def null_dataset():
    return datasets.Dataset.from_dict(
        {
            "input_ids": [[1, 2], None, [3, None, 4], [5]],
            "label": [0, 1, 1, None],
        }
    )


@pytest.mark.parametrize(
    ("indices", "message"),
    [
        ([0, 1], "'input_ids' is null (None) in row 1 of the batch (dataset index 1)"),
        ([2], "'input_ids' holds a null (None) at position 1 in row 0 of the batch "
              "(dataset index 2)"),
        ([0, 3], "'label' is null (None) in row 1 of the batch (dataset index 3)"),
    ],
)
def test_nulls_are_rejected_naming_column_and_row(bert_tokenizer, indices, message):
    batch = ArrowBatches(null_dataset()).__getitems__(indices)
    with pytest.raises(ValueError) as info:
        fastcollate.DataCollatorWithPadding(bert_tokenizer)(batch)
    assert message in str(info.value)


def test_nulls_are_found_through_an_indices_mapping(bert_tokenizer):
    dataset = null_dataset().select([3, 0, 1])
    batch = ArrowBatches(dataset, ["input_ids"]).__getitems__([1, 2])
    with pytest.raises(ValueError, match=r"row 1 of the batch \(dataset index 2\)"):
        fastcollate.DataCollatorWithPadding(bert_tokenizer)(batch)
    ok = ArrowBatches(dataset, ["input_ids"]).__getitems__([0, 1])
    np.testing.assert_array_equal(
        fastcollate.pad(ok, bert_tokenizer, return_tensors="np")["input_ids"], [[5, 0], [1, 2]]
    )


def test_indices_are_checked_and_negative_ones_count_from_the_end(bert_tokenizer):
    dataset = imdb_like(rows=6)
    wrapper = ArrowBatches(dataset)
    collator = fastcollate.DataCollatorWithPadding(bert_tokenizer, return_tensors="np")
    assert_same_batch(collator(wrapper.__getitems__([-1, 0])),
                      collator(dataset.__getitems__([5, 0])))
    for bad in (6, -7):
        with pytest.raises(IndexError, match=f"index {bad} is out of range for a dataset of 6"):
            collator(wrapper.__getitems__([0, bad]))


def test_values_above_int64_are_an_error():
    table = pa.table({"input_ids": pa.array([[1], [2**63]], type=pa.list_(pa.uint64()))})
    dataset = datasets.Dataset(InMemoryTable(table))
    batch = ArrowBatches(dataset).__getitems__([0, 1])
    with pytest.raises(ValueError, match="'input_ids' in row 1 .* does not fit in int64"):
        fastcollate.pad(batch, pad_token_id=0)


def test_the_batch_does_not_alias_the_dataset(bert_tokenizer):
    dataset = imdb_like(rows=4).flatten_indices()
    before = dataset[0]["input_ids"]
    out = fastcollate.pad(ArrowBatches(dataset).__getitems__([0]), bert_tokenizer,
                          return_tensors="np", padding="do_not_pad")
    out["input_ids"][:] = -1
    assert dataset[0]["input_ids"] == before
    assert not out["input_ids"].flags.owndata  # the Rust buffer, handed over without a copy


def test_column_selection():
    dataset = datasets.Dataset.from_dict(
        {"text": ["a", "b"], "input_ids": [[1], [2]], "nested": [[[1]], [[2]]], "label": [0, 1]}
    )
    assert ArrowBatches(dataset).columns == ["input_ids", "label"]
    assert ArrowBatches(dataset, ["label", "input_ids"]).columns == ["label", "input_ids"]
    assert list(ArrowBatches(dataset, ["label", "input_ids"])[0]) == ["label", "input_ids"]
    with pytest.raises(TypeError, match="column 'text' holds string"):
        ArrowBatches(dataset, ["input_ids", "text"])
    with pytest.raises(TypeError, match="column 'nested'"):
        ArrowBatches(dataset, ["nested"])
    with pytest.raises(ValueError, match="no column 'missing'"):
        ArrowBatches(dataset, ["missing"])
    with pytest.raises(ValueError, match="formatted as 'torch'"):
        ArrowBatches(dataset.with_format("torch"))
    with pytest.raises(TypeError, match="wraps a datasets.Dataset"):
        ArrowBatches([{"input_ids": [1]}])
    hidden = dataset.with_format(None, columns=["input_ids"])
    assert ArrowBatches(hidden).columns == ["input_ids"]


def test_pad_without_the_main_input_raises_as_for_rows(bert_tokenizer):
    dataset = datasets.Dataset.from_dict({"label": [0, 1]})
    batch, rows = batch_of(dataset, [0, 1])
    assert_arrow_equals_rows(lambda b: fastcollate.pad(b, bert_tokenizer), batch, rows)


def test_wrap_for_trainer_only_wraps_what_it_reproduces(bert_tokenizer):
    dataset = imdb_like(rows=8)
    ours = fastcollate.DataCollatorWithPadding(bert_tokenizer)
    assert isinstance(wrap_for_trainer(dataset, ours), ArrowBatches)
    assert isinstance(wrap_for_trainer(dataset, fastcollate.default_data_collator), ArrowBatches)
    assert unwrap(wrap_for_trainer(dataset, ours)) is dataset
    # transformers' collators want lists of rows; a text column has to reach the collator.
    theirs = transformers.DataCollatorWithPadding(bert_tokenizer)
    assert wrap_for_trainer(dataset, theirs) is dataset
    with_text = dataset.add_column("text", ["t"] * 8)
    assert wrap_for_trainer(with_text, ours) is with_text
    # Integer columns as torch tensors collate as their Python rows (test_torch_formatted);
    # numpy rows keep each column's dtype.
    torch_formatted = dataset.with_format("torch")
    assert isinstance(wrap_for_trainer(torch_formatted, ours), ArrowBatches)
    assert torch_formatted.format["type"] == "torch"
    assert not isinstance(wrap_for_trainer(dataset.with_format("numpy"), ours), ArrowBatches)


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["random", "group_by_length"])
def test_trainer_trains_through_the_arrow_path(bert_tokenizer, tmp_path, strategy):
    # Text columns are removed (remove_unused_columns) before the dataset is wrapped; the
    # batches and so the losses are those of transformers' own Trainer on the row path.
    dataset = imdb_like(rows=24).add_column("text", ["unused"] * 24)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), per_device_train_batch_size=4, report_to=[], use_cpu=True,
        max_steps=3, logging_steps=1, save_strategy="no", train_sampling_strategy=strategy,
    )
    collator = fastcollate.DataCollatorWithPadding(bert_tokenizer)
    runs = []
    # SeededTrainer: group_by_length shuffled from seed + epoch, as fastcollate's.
    for cls in (SeededTrainer, fastcollate.Trainer):
        trainer = cls(model=tiny_bert(), args=args, train_dataset=dataset,
                      data_collator=collator, processing_class=bert_tokenizer)
        loader = trainer.get_train_dataloader()
        assert isinstance(loader.dataset, ArrowBatches) == (cls is fastcollate.Trainer)
        torch.manual_seed(1)
        batches = list(loader)
        trainer.train()
        losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
        runs.append((batches, losses))
    (theirs, their_losses), (ours, our_losses) = runs
    assert isinstance(ours[0], transformers.BatchEncoding)
    assert_same_batches(ours, theirs)
    assert len(our_losses) == 3 and our_losses == their_losses


def test_arrow_arrays_sliced_at_every_level():
    # Parent and child arrays with their own offsets (slices of slices), bit offsets of packed
    # booleans, large and fixed-size lists, half floats: each row must read as datasets reads it.
    ids = pa.ListArray.from_arrays(
        pa.array([0, 2, 2, 5, 6], pa.int32()), pa.array(range(10), pa.int16()).slice(3)
    ).slice(1)
    bools = pa.LargeListArray.from_arrays(
        pa.array([0, 3, 4, 4, 7], pa.int64()),
        pa.array([i % 3 == 0 for i in range(20)]).slice(5),
    ).slice(1)
    halves = pa.FixedSizeListArray.from_arrays(
        pa.array(np.linspace(-2, 2, 14), pa.float64()).cast(pa.float16()).slice(2), 3
    ).slice(1, 3)
    label = pa.array(np.linspace(0, 1, 9), pa.float32()).slice(5, 3)
    flags = pa.array([True, False, True, True, False, True]).slice(3)
    table = pa.table({"input_ids": ids, "mask": bools, "halves": halves, "label": label,
                      "flag": flags})
    dataset = datasets.Dataset(InMemoryTable(table)).select([2, 0, 1, 1])
    batch, rows = batch_of(dataset, [0, 1, 2, 3])
    assert batch.columns == ["input_ids", "mask", "halves", "label", "flag"]
    for float32 in (True, False):
        ours = batch.collate([], float32=float32, allow_ragged=True)
        expected = fastcollate._native.collate(rows, [], float32=float32, allow_ragged=True)
        assert list(ours) == list(expected)
        for key in expected:
            assert_same_value(key, ours[key], expected[key])
