"""`fastcollate.collate_arrow(batch, collator)` against the row path: for hypothesis-generated
`pyarrow.RecordBatch`es and `Table`s (int32 / int64 values, list and large_list, chunked
tables, sliced batches, nulls, text columns) it must give exactly what the same collator gives
for `batch.to_pylist()` -- read from the Arrow buffers where the collator can, with no row read
-- and what transformers' collator gives for those rows."""

from __future__ import annotations

import copy
import importlib.util

import datasets
import numpy as np
import pyarrow as pa
import pytest
import transformers
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

import fastcollate
from fastcollate import collate_arrow
from fastcollate.arrow import ArrowBatch
from tests.support.compare import assert_same_batch, has_object_array
from tests.support.hypothesis_profiles import examples
from tests.support.streams import local_stream, lognormal_lengths

pytestmark = pytest.mark.parity

SETTINGS = settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
VALUE_TYPES = {"int32": pa.int32(), "int64": pa.int64()}
LIST_KINDS = {"list": pa.list_, "large_list": pa.large_list}


@st.composite
def record_batches(
    draw, *, labels=None, extra_keys=(), text=False, nulls=False, equal_lengths=False
):
    """A RecordBatch or Table of token rows (`input_ids`, optional `extra_keys` of the same
    length, `labels`: "scalar", "same" (a list as long as input_ids), "free" (any length)),
    possibly chunked, sliced out of a bigger batch, with a text column or a null; with
    `equal_lengths` every row is as long (what a collator that does not pad can stack)."""
    rows = draw(st.integers(1, 6))
    if equal_lengths:
        lengths = [draw(st.integers(1, 9))] * rows
    else:
        lengths = draw(st.lists(st.integers(1, 9), min_size=rows, max_size=rows))
    value_type = VALUE_TYPES[draw(st.sampled_from(sorted(VALUE_TYPES)))]
    list_type = LIST_KINDS[draw(st.sampled_from(sorted(LIST_KINDS)))](value_type)
    ids = st.integers(0, 30_000)
    data = {"input_ids": [draw(st.lists(ids, min_size=n, max_size=n)) for n in lengths]}
    types = {"input_ids": list_type}
    for key in extra_keys:
        data[key] = [draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)) for n in lengths]
        types[key] = list_type
    if labels == "scalar":
        data["label"] = draw(st.lists(st.integers(0, 4), min_size=rows, max_size=rows))
        types["label"] = value_type
    elif labels in ("same", "free"):
        label_lengths = lengths if labels == "same" else [draw(st.integers(1, 9)) for _ in lengths]
        data["labels"] = [
            draw(st.lists(st.integers(-100, 30_000), min_size=n, max_size=n)) for n in label_lengths
        ]
        types["labels"] = list_type
    if text:
        data["text"] = [draw(st.text(max_size=5)) for _ in range(rows)]
        types["text"] = pa.string()
    if nulls:
        key = draw(st.sampled_from(sorted(data)))
        row = draw(st.integers(0, rows - 1))
        if isinstance(data[key][row], list) and draw(st.booleans()):
            data[key][row] = [*data[key][row][:-1], None]
        else:
            data[key][row] = None
    # Rows before and after the batch, cut off again by slicing (offset != 0).
    before, after = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    padded = {k: v[:1] * before + v + v[:1] * after for k, v in data.items()}
    schema = pa.schema([(k, types[k]) for k in data])
    whole = pa.RecordBatch.from_pydict(padded, schema=schema)
    batch = whole.slice(before, rows)
    shape = draw(st.sampled_from(["record_batch", "table", "chunked"]))
    if shape == "table":
        return pa.Table.from_batches([batch])
    if shape == "chunked":
        cut = draw(st.integers(0, rows))
        return pa.Table.from_batches([batch.slice(0, cut), batch.slice(cut)], schema=schema)
    return batch


class RowReads:
    """Counts the batches read as Python rows through `to_pylist` / `ArrowBatch.rows`."""

    def __init__(self, monkeypatch):
        self.count = 0
        original_rows = ArrowBatch.rows

        def rows(batch):
            self.count += 1
            return original_rows(batch)

        monkeypatch.setattr(ArrowBatch, "rows", rows)


def outcome(call):
    try:
        return call(), None
    except (ValueError, TypeError) as err:
        return None, err


def check(make, make_theirs, batch, *, native=True):
    """`collate_arrow(batch, make())` equals `make()(batch.to_pylist())`, or raises the same
    error; with no row read when `native`; and transformers' collator agrees on the rows."""
    rows = batch.to_pylist()
    ours, ours_err = outcome(lambda: collate_arrow(batch, make()))
    expected, expected_err = outcome(lambda: make()(copy.deepcopy(rows)))
    if expected_err is not None:
        event("both raised")
        assert type(ours_err) is type(expected_err), (ours_err, expected_err)
        assert str(ours_err) == str(expected_err)
        return
    assert ours_err is None, f"collate_arrow raised {ours_err!r}, the row path did not"
    assert_same_batch(ours, expected)
    event("arrow path" if native else "row path")
    if make_theirs is None:
        return
    theirs = make_theirs()(copy.deepcopy(rows))
    assert not has_object_array(theirs)
    assert_same_batch(ours, theirs)


def tokenizer_on(side, tokenizer):
    tokenizer = copy.copy(tokenizer)
    tokenizer.padding_side = side
    return tokenizer


def native_read(batch) -> bool:
    """Whether collate_arrow reads this batch natively (no text column, no null)."""
    from fastcollate.arrow.record_batches import reads_natively

    table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
    return reads_natively(table)


@SETTINGS
@given(
    batch=st.one_of(
        record_batches(labels="scalar", extra_keys=["attention_mask"]),
        record_batches(labels="scalar", extra_keys=["token_type_ids"], text=True),
        record_batches(labels="scalar", nulls=True),
    ),
    side=st.sampled_from(["left", "right"]),
    multiple=st.sampled_from([None, 8]),
    return_tensors=st.sampled_from(["pt", "np"]),
)
def test_data_collator_with_padding(
    bert_tokenizer, monkeypatch, batch, side, multiple, return_tensors
):
    tokenizer = tokenizer_on(side, bert_tokenizer)
    options = {"pad_to_multiple_of": multiple, "return_tensors": return_tensors}
    reads = RowReads(monkeypatch)
    # Text columns make transformers build a tensor from strings: compared with the rows only.
    theirs = (
        None
        if "text" in batch.column_names or not native_read(batch)
        else (lambda: transformers.DataCollatorWithPadding(tokenizer, **options))
    )
    check(
        lambda: fastcollate.DataCollatorWithPadding(tokenizer, **options),
        theirs,
        batch,
        native=native_read(batch),
    )
    if native_read(batch):
        assert reads.count == 0


@SETTINGS
@given(
    batch=st.one_of(
        record_batches(labels="same", extra_keys=["attention_mask"]),
        record_batches(labels="same", nulls=True),
    ),
    side=st.sampled_from(["left", "right"]),
    label_pad=st.sampled_from([-100, 0]),
)
def test_token_classification(bert_tokenizer, monkeypatch, batch, side, label_pad):
    tokenizer = tokenizer_on(side, bert_tokenizer)
    options = {"label_pad_token_id": label_pad}
    reads = RowReads(monkeypatch)
    check(
        lambda: fastcollate.DataCollatorForTokenClassification(tokenizer, **options),
        None
        if not native_read(batch)
        else (lambda: transformers.DataCollatorForTokenClassification(tokenizer, **options)),
        batch,
    )
    if native_read(batch):
        assert reads.count == 0


@SETTINGS
@given(
    batch=st.one_of(record_batches(labels="free"), record_batches(labels="free", nulls=True)),
    side=st.sampled_from(["left", "right"]),
    multiple=st.sampled_from([None, 4]),
)
def test_seq2seq(bert_tokenizer, monkeypatch, batch, side, multiple):
    tokenizer = tokenizer_on(side, bert_tokenizer)
    options = {"pad_to_multiple_of": multiple}
    reads = RowReads(monkeypatch)
    check(
        lambda: fastcollate.DataCollatorForSeq2Seq(tokenizer, **options),
        None
        if not native_read(batch)
        else (lambda: transformers.DataCollatorForSeq2Seq(tokenizer, **options)),
        batch,
    )
    if native_read(batch):
        assert reads.count == 0


@SETTINGS
@given(
    batch=st.one_of(record_batches(labels="same"), record_batches()),
    options=st.fixed_dictionaries(
        {
            "return_position_ids": st.booleans(),
            "separator_id": st.sampled_from([-100, 7]),
            "return_flash_attn_kwargs": st.booleans(),
            "return_seq_idx": st.booleans(),
        }
    ),
    return_tensors=st.sampled_from(["pt", "np"]),
)
def test_flattening(monkeypatch, batch, options, return_tensors):
    options = {**options, "return_tensors": return_tensors}
    reads = RowReads(monkeypatch)
    check(
        lambda: fastcollate.DataCollatorWithFlattening(**options),
        lambda: transformers.DataCollatorWithFlattening(**options),
        batch,
    )
    assert reads.count == 0


@SETTINGS
@given(
    batch=record_batches(extra_keys=["attention_mask"]),
    side=st.sampled_from(["left", "right"]),
    return_tensors=st.sampled_from(["pt", "np"]),
)
def test_causal_language_modeling(bert_tokenizer, monkeypatch, batch, side, return_tensors):
    tokenizer = tokenizer_on(side, bert_tokenizer)
    options = {"mlm": False, "return_tensors": return_tensors}
    reads = RowReads(monkeypatch)
    check(
        lambda: fastcollate.DataCollatorForLanguageModeling(tokenizer, **options),
        lambda: transformers.DataCollatorForLanguageModeling(tokenizer, **options),
        batch,
    )
    assert reads.count == 0


def test_masked_language_modeling_with_a_seed_masks_as_the_rows(bert_tokenizer):
    batch = pa.RecordBatch.from_pydict({"input_ids": [[101, 7, 8, 9, 102], [101, 5, 102]]})
    options = {"mlm_probability": 0.5, "seed": 3}
    ours = collate_arrow(
        batch, fastcollate.DataCollatorForLanguageModeling(bert_tokenizer, **options)
    )
    rows = fastcollate.DataCollatorForLanguageModeling(bert_tokenizer, **options)(batch.to_pylist())
    assert_same_batch(ours, rows)


@SETTINGS
@given(
    batch=st.one_of(
        record_batches(labels="scalar", equal_lengths=True),
        record_batches(labels="scalar", equal_lengths=True, nulls=True),
        record_batches(labels="scalar"),
    ),
    return_tensors=st.sampled_from(["pt", "np"]),
)
@example(  # transformers builds an object array of the null token
    batch=pa.RecordBatch.from_pydict(
        {
            "input_ids": pa.array([[None]], pa.large_list(pa.int32())),
            "label": pa.array([0], pa.int32()),
        }
    ),
    return_tensors="np",
)
def test_default_data_collator(monkeypatch, batch, return_tensors):
    reads = RowReads(monkeypatch)
    # Ragged rows raise on both paths (default_data_collator does not pad).
    check(
        lambda: lambda rows: fastcollate.default_data_collator(rows, return_tensors),
        None,
        batch,
    )
    collator = fastcollate.DefaultDataCollator(return_tensors=return_tensors)
    try:
        theirs = transformers.default_data_collator(batch.to_pylist(), return_tensors)
    except (ValueError, TypeError, RuntimeError):
        # transformers' own error (ragged rows): `check` above compared the two errors.
        event("transformers raises")
        return
    if has_object_array(theirs):  # e.g. a null token with "np": fastcollate raises instead
        with pytest.raises(ValueError, match="cannot make a numpy array"):
            collate_arrow(batch, collator)
        return
    ours = collate_arrow(batch, collator)
    assert_same_batch(ours, theirs)
    if native_read(batch):
        assert reads.count <= 1  # default_data_collator looks at row 0 as a Python row


def test_a_plain_callable_gets_the_rows():
    batch = pa.RecordBatch.from_pydict({"input_ids": [[1, 2], [3]], "text": ["a", "b"]})
    seen = []
    assert collate_arrow(batch, seen.append) is None
    assert seen == [[{"input_ids": [1, 2], "text": "a"}, {"input_ids": [3], "text": "b"}]]


def test_a_subclass_that_overrides_call_gets_the_rows(bert_tokenizer):
    class Rows(fastcollate.DataCollatorWithPadding):
        def __call__(self, features):
            assert isinstance(features, list)
            return super().__call__(features)

    batch = pa.RecordBatch.from_pydict({"input_ids": [[1, 2], [3]]})
    out = collate_arrow(batch, Rows(bert_tokenizer, return_tensors="np"))
    np.testing.assert_array_equal(out["input_ids"], [[1, 2], [3, 0]])


def test_the_native_path_hands_the_collator_an_arrow_batch():
    class Spy:
        accepts_arrow_batches = True

        def __call__(self, batch):
            self.batch = batch
            return "ok"

    spy = Spy()
    table = pa.table({"input_ids": [[1, 2], [3]], "label": [0, 1]})
    assert collate_arrow(table, spy) == "ok"
    assert isinstance(spy.batch, ArrowBatch)
    assert spy.batch.rows() == table.to_pylist()
    assert spy.batch[1] == {"input_ids": [3], "label": 1}
    # A text column goes to the rows, so the collator decides what happens to it.
    assert collate_arrow(table.append_column("text", pa.array(["a", "b"])), spy) == "ok"
    assert isinstance(spy.batch, list)


def test_columns_selects_and_checks(bert_tokenizer):
    table = pa.table({"text": ["a", "b"], "input_ids": [[1, 2], [3]], "label": [0, 1]})
    collator = fastcollate.DataCollatorWithPadding(bert_tokenizer, return_tensors="np")
    out = collate_arrow(table, collator, columns=["input_ids", "label"])
    assert list(out) == ["input_ids", "attention_mask", "labels"]
    with pytest.raises(ValueError, match=r"\['ids'\]"):
        collate_arrow(table, collator, columns=["ids"])
    with pytest.raises(ValueError, match="twice"):
        collate_arrow(table, collator, columns=["input_ids", "input_ids"])


def test_bad_input_is_a_type_error_and_the_batch_is_untouched(bert_tokenizer):
    collator = fastcollate.DataCollatorWithPadding(bert_tokenizer)
    with pytest.raises(TypeError, match="RecordBatch or pyarrow.Table, not a list"):
        collate_arrow([{"input_ids": [1]}], collator)
    batch = pa.RecordBatch.from_pydict({"input_ids": [[1, 2], [3]]})
    before = batch.to_pylist()
    out = collate_arrow(batch, fastcollate.DataCollatorForLanguageModeling(bert_tokenizer))
    out["input_ids"][:] = 0
    assert batch.to_pylist() == before


def test_empty_batches_raise_as_the_row_path(bert_tokenizer):
    batch = pa.RecordBatch.from_pydict({"input_ids": pa.array([], pa.list_(pa.int64()))})
    collator = fastcollate.DataCollatorWithPadding(bert_tokenizer)
    with pytest.raises(Exception) as ours:
        collate_arrow(batch, collator)
    with pytest.raises(Exception) as rows:
        collator([])
    assert type(ours.value) is type(rows.value) and str(ours.value) == str(rows.value)


@pytest.mark.skipif(
    importlib.util.find_spec("trl") is None, reason="TRL is not installed (it needs Python 3.11)"
)
@SETTINGS
@given(
    batch=st.one_of(record_batches(labels="same"), record_batches()),
    padding_free=st.booleans(),
    position_ids=st.booleans(),
)
def test_trl_language_modeling(monkeypatch, batch, padding_free, position_ids):
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling as TRLCollator

    from fastcollate.trl import DataCollatorForLanguageModeling

    options = {
        "pad_token_id": 0,
        "padding_free": padding_free,
        "return_position_ids": position_ids,
    }
    reads = RowReads(monkeypatch)
    check(
        lambda: DataCollatorForLanguageModeling(**options),
        lambda: TRLCollator(**options),
        batch,
    )
    assert reads.count == 0


WORDS = ("good", "bad", "film", "plot", "very", "actor", "scene", "boring", "great", "ending")


def tokenized_reviews(tokenizer, n, seed=0):
    """`n` reviews of lognormal-ish length tokenized by `tokenizer`, with a class `label`,
    token-level `labels` (-100 on the special tokens) and each row's number."""
    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(WORDS, size=k)) for k in lognormal_lengths(n, seed, cap=200)]
    encoded = tokenizer(texts)
    labels = [[-100, *((i + k) % 5 for k in range(len(ids) - 2)), -100]
              for i, ids in enumerate(encoded["input_ids"])]
    return datasets.Dataset.from_dict(
        {**encoded, "label": [i % 3 for i in range(n)], "labels": labels, "row": list(range(n))}
    )


@pytest.mark.parametrize("file_format", ["parquet", "json"])
@pytest.mark.parametrize(
    ("collator", "options", "columns"),
    [
        ("DataCollatorWithPadding", {"pad_to_multiple_of": 8},
         ["input_ids", "token_type_ids", "attention_mask", "label"]),
        ("DataCollatorForTokenClassification", {}, ["input_ids", "attention_mask", "labels"]),
    ],
)
def test_a_datasets_stream_from_local_files(
    tmp_path, bert_tokenizer, monkeypatch, file_format, collator, options, columns
):
    dataset = tokenized_reviews(bert_tokenizer, 203)
    stream = local_stream(tmp_path, file_format, dataset).with_format("arrow")
    ours = getattr(fastcollate, collator)(bert_tokenizer, **options)
    theirs = getattr(transformers, collator)(bert_tokenizer, **options)
    reads = RowReads(monkeypatch)
    seen, sizes = [], []
    for table in stream.iter(batch_size=16):
        assert isinstance(table, pa.Table)
        numbers = table.column("row").to_pylist()
        seen += numbers
        sizes.append(len(numbers))
        # transformers' collator on the same rows, as the dataset holds them.
        rows = [{key: row[key] for key in columns} for row in dataset.select(numbers)]
        assert_same_batch(collate_arrow(table, ours, columns=columns), theirs(rows))
    assert reads.count == 0  # every batch read from the Arrow buffers
    assert sizes == [16] * 12 + [11]  # the short last batch included
    assert seen == list(range(203))  # every row once
