"""The Arrow path of the collator family: DataCollatorForTokenClassification,
DataCollatorForSeq2Seq, DataCollatorWithFlattening and DataCollatorForLanguageModeling given an
`ArrowBatch` must give, bit for bit, what they give for the rows `datasets` returns (or raise the
same error), and, where that succeeds, what transformers' collator gives for those rows. Datasets
are hypothesis-generated (value types, list kinds, chunking, shuffle / select / filter / sort),
with every padding option on both padding sides, "pt" and "np". The batch must not be turned
into Python rows on the way, except where the row path is the documented fallback."""

from __future__ import annotations

import copy
from contextlib import contextmanager

import datasets
import numpy as np
import pytest
import torch
import transformers
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader
from transformers.utils import PaddingStrategy

import fastcollate
from fastcollate import ArrowBatch, ArrowBatches
from fastcollate.arrow.batches import accepts_arrow_batches
from fastcollate.arrow.trainer_datasets import wrap_for_trainer
from tests.support.arrow_datasets import INT_TYPES, sequence_feature, transformed
from tests.support.compare import assert_same_batch, has_object_array
from tests.support.hypothesis_profiles import examples
from tests.support.transformers_releases import flattening_as_5_24

pytestmark = pytest.mark.parity

datasets.disable_progress_bars()

SETTINGS = settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
SPECIAL_IDS = (0, 100, 101, 102, 103)  # [PAD], [UNK], [CLS], [SEP], [MASK]: fit even int8
LABEL_TYPES = ("int8", "int32", "int64")
PADDINGS = [True, "longest", "max_length", False, "do_not_pad", *PaddingStrategy]


# --- Datasets -----------------------------------------------------------------------------------


def token_ids(length):
    values = st.one_of(st.integers(1, 120), st.sampled_from(SPECIAL_IDS))
    return st.lists(values, min_size=length, max_size=length)


@st.composite
def token_dataset(draw, lengths, label=None, extra_keys=None, ids_types=INT_TYPES):
    """A tokenized dataset with rows of `lengths` tokens (input_ids and the `extra_keys` masks)
    and `label` = (key, lengths, type): a list per row (None: a null row), then chunked and
    transformed. Returns the dataset and the batch indices to collate."""
    rows = len(lengths)
    list_kind = draw(st.sampled_from(["list", "large_list"]))
    if extra_keys is None:
        extra_keys = sorted(draw(st.sets(st.sampled_from(["attention_mask", "token_type_ids"]))))
    mask_type = draw(st.sampled_from(["int8", "int64", "bool"]))
    ids_type = draw(st.sampled_from(ids_types))
    if ids_type == "bool":
        data = {
            "input_ids": [draw(st.lists(st.booleans(), min_size=n, max_size=n)) for n in lengths]
        }
    else:
        data = {"input_ids": [draw(token_ids(n)) for n in lengths]}
    features = {"input_ids": sequence_feature(ids_type, list_kind)}
    for key in extra_keys:
        flags = st.booleans() if mask_type == "bool" else st.integers(0, 1)
        data[key] = [draw(st.lists(flags, min_size=n, max_size=n)) for n in lengths]
        features[key] = sequence_feature(mask_type, list_kind)
    if label is not None:
        key, label_lengths, label_type = label
        values = st.booleans() if label_type == "bool" else st.integers(-100, 60)
        data[key] = [
            None if n is None else draw(st.lists(values, min_size=n, max_size=n))
            for n in label_lengths
        ]
        features[key] = sequence_feature(label_type, list_kind)
    data["order"] = draw(st.lists(st.integers(0, 5), min_size=rows, max_size=rows))
    features["order"] = datasets.Value("int16")
    dataset = draw(transformed(data, datasets.Features(features)))
    if draw(st.booleans()):
        # Without the helper column (as the columns a Trainer keeps would be).
        dataset = dataset.remove_columns("order")
    indices = draw(st.lists(st.integers(0, len(dataset) - 1), min_size=1, max_size=6))
    return dataset, indices


def draw_lengths(draw, equal, low=0, high=9):
    size = draw(st.integers(1, 8))
    if equal:
        return [draw(st.integers(low, high))] * size
    return draw(st.lists(st.integers(low, high), min_size=size, max_size=size))


padding_options = st.fixed_dictionaries(
    {
        "padding": st.sampled_from(PADDINGS),
        "max_length": st.one_of(st.none(), st.integers(0, 12)),
        "pad_to_multiple_of": st.one_of(st.none(), st.integers(1, 8)),
        "return_tensors": st.sampled_from(["pt", "np"]),
    }
)


def with_side(tokenizer, side):
    tokenizer = copy.copy(tokenizer)
    tokenizer.padding_side = side
    return tokenizer


# --- Checking -----------------------------------------------------------------------------------

ROW_READS = ("rows", "__getitem__", "__iter__")


@contextmanager
def counting_row_reads():
    """Records every time an ArrowBatch is read as Python rows (the row path)."""
    calls: list[str] = []
    originals = {name: getattr(ArrowBatch, name) for name in ROW_READS}

    def spy(name):
        def read(self, *args):
            calls.append(name)
            return originals[name](self, *args)

        return read

    for name in ROW_READS:
        setattr(ArrowBatch, name, spy(name))
    try:
        yield calls
    finally:
        for name, original in originals.items():
            setattr(ArrowBatch, name, original)


def outcome(fn, arg):
    try:
        return fn(arg), None
    except (ValueError, TypeError, IndexError, RuntimeError) as err:
        return None, err


def batch_of(dataset, indices):
    wrapper = ArrowBatches(dataset)
    rows = dataset.select_columns(wrapper.columns).__getitems__(indices)
    return wrapper.__getitems__(indices), rows


def check(make, make_theirs, batch, rows, *, divergent=False, native=True):
    """`make()` (a fresh fastcollate collator call) on the ArrowBatch gives exactly what it gives
    on the rows, or the same error; on the Arrow path unless it failed or `native` is False.
    Where it succeeds transformers' collator gives the same; where it fails transformers fails
    too, unless `divergent` (where fastcollate raises by design and transformers does not)."""
    with counting_row_reads() as reads:
        ours, ours_err = outcome(make(), batch)
    expected, expected_err = outcome(make(), copy.deepcopy(rows))
    if expected_err is not None:
        event("both raised")
        assert ours_err is not None, f"row path raised {expected_err!r}, Arrow path did not"
        assert type(ours_err) is type(expected_err)
        assert str(ours_err) == str(expected_err)
    else:
        assert ours_err is None, f"Arrow path raised {ours_err!r}, row path did not"
        assert_same_batch(ours, expected)
        if native:
            event("arrow path")
            assert reads == [], f"the ArrowBatch was read as rows ({reads})"
        else:
            event("row path (fallback)")
    try:
        theirs = make_theirs()(copy.deepcopy(rows))
        theirs_failed = has_object_array(theirs)
    except (ValueError, TypeError, RuntimeError, IndexError):
        theirs_failed = True
    if expected_err is None:
        assert not theirs_failed, "transformers failed where fastcollate did not"
        assert_same_batch(ours, theirs)
    else:
        assert theirs_failed or divergent, f"only fastcollate raised: {expected_err!r}"


def round_up(length, multiple):
    if multiple and length % multiple:
        return (length // multiple + 1) * multiple
    return length


def padded_lengths(lengths, options, tokenizer):
    """The length each row's inputs are padded to (transformers' tokenizer.pad)."""
    padding = options["padding"]
    multiple = options["pad_to_multiple_of"]
    if padding in (False, "do_not_pad"):
        return list(lengths)
    if padding == "max_length":
        limit = options["max_length"]
        if limit is None:
            limit = tokenizer.model_max_length
        return [max(n, round_up(limit, multiple)) for n in lengths]
    return [round_up(max(lengths), multiple)] * len(lengths)


def inputs_diverge(lengths, options, tokenizer):
    """fastcollate raises where transformers leaves rows unpadded: rows longer than max_length,
    and ragged rows under no padding (see test_pad_parity)."""
    padded = padded_lengths(lengths, options, tokenizer)
    if options["padding"] == "max_length":
        return padded != padded_lengths([0] * len(lengths), options, tokenizer)
    if options["padding"] in (False, "do_not_pad"):
        return len(set(lengths)) > 1
    return False


# --- DataCollatorForTokenClassification ---------------------------------------------------------


@st.composite
def token_classification_case(draw):
    options = draw(padding_options)
    lengths = draw_lengths(draw, equal=draw(st.booleans()))
    label_key = draw(st.sampled_from(["labels", "label", None]))
    label = None
    if label_key is not None:
        if draw(st.booleans()):
            label_lengths = lengths
        else:
            label_lengths = [draw(st.integers(0, n + 1)) for n in lengths]
        label = (label_key, label_lengths, draw(st.sampled_from(LABEL_TYPES)))
    dataset, indices = draw(token_dataset(lengths, label))
    options["label_pad_token_id"] = draw(st.sampled_from([-100, 0, 7]))
    return dataset, indices, options, draw(st.sampled_from(["left", "right"]))


@SETTINGS
@given(case=token_classification_case())
def test_token_classification_arrow_equals_rows_and_transformers(bert_tokenizer, case):
    dataset, indices, options, side = case
    tokenizer = with_side(bert_tokenizer, side)
    batch, rows = batch_of(dataset, indices)
    lengths = [len(r["input_ids"]) for r in rows]
    label_key = next((k for k in ("label", "labels") if k in rows[0]), None)
    padded = padded_lengths(lengths, options, tokenizer)
    divergent = inputs_diverge(lengths, options, tokenizer) or (
        label_key is not None
        and any(len(r[label_key]) > n for r, n in zip(rows, padded, strict=True))
    )
    check(
        lambda: fastcollate.DataCollatorForTokenClassification(tokenizer, **options),
        lambda: transformers.DataCollatorForTokenClassification(tokenizer, **options),
        batch,
        rows,
        divergent=divergent,
    )


# --- DataCollatorForSeq2Seq ---------------------------------------------------------------------


@st.composite
def seq2seq_case(draw):
    options = draw(padding_options)
    equal = draw(st.booleans())
    lengths = draw_lengths(draw, equal)
    label_key = draw(st.sampled_from(["labels", "labels", "label", "none", "absent"]))
    label = None
    if label_key != "absent":
        if equal:
            label_lengths = [draw(st.integers(0, 12))] * len(lengths)
        else:
            label_lengths = [draw(st.integers(0, 12)) for _ in lengths]
        if label_key == "none":
            # A labels column of nulls: None labels, which the row path handles.
            label_lengths = [None] * len(lengths)
            label_key = "labels"
        elif draw(st.integers(0, 9)) == 0:
            label_lengths[0] = None  # a null among labels: an error on both paths
        label = (label_key, label_lengths, draw(st.sampled_from(LABEL_TYPES)))
    dataset, indices = draw(token_dataset(lengths, label))
    options["label_pad_token_id"] = draw(st.sampled_from([-100, 0, 3]))
    with_model = draw(st.booleans()) and options["return_tensors"] == "pt"
    return dataset, indices, options, draw(st.sampled_from(["left", "right"])), with_model


@SETTINGS
@given(case=seq2seq_case())
def test_seq2seq_arrow_equals_rows_and_transformers(bert_tokenizer, t5_model, case):
    dataset, indices, options, side, with_model = case
    tokenizer = with_side(bert_tokenizer, side)
    batch, rows = batch_of(dataset, indices)
    label_key = next((k for k in ("label", "labels") if k in rows[0]), None)
    labels = [r[label_key] for r in rows] if label_key else []
    nulls = label_key is not None and dataset.data.table.column(label_key).null_count > 0
    if with_model and (not labels or any(v is None or not v for v in labels)):
        with_model = False  # T5's _shift_right cannot take a (B, 0) labels tensor
    kwargs = {**options, "model": t5_model if with_model else None}
    lengths = [len(r["input_ids"]) for r in rows]
    divergent = inputs_diverge(lengths, options, bert_tokenizer) or (
        options["padding"] == "max_length"
        and options["max_length"] is not None
        and any(v is not None and len(v) > options["max_length"] for v in labels)
    )
    check(
        lambda: fastcollate.DataCollatorForSeq2Seq(tokenizer, **kwargs),
        lambda: transformers.DataCollatorForSeq2Seq(tokenizer, **kwargs),
        batch,
        rows,
        divergent=divergent,
        native=not nulls,
    )


# --- DataCollatorWithFlattening -----------------------------------------------------------------


@st.composite
def flattening_case(draw):
    lengths = draw_lengths(draw, equal=False, low=draw(st.sampled_from([0, 1, 1, 1])))
    label = None
    if draw(st.booleans()):
        label_lengths = list(lengths)
        if draw(st.integers(0, 5)) == 0:
            label_lengths[-1] += 1  # a mismatch: the row path's error
        label = ("labels", label_lengths, draw(st.sampled_from([*LABEL_TYPES, "bool"])))
    ids_types = (*INT_TYPES, "bool") if draw(st.integers(0, 5)) == 0 else INT_TYPES
    dataset, indices = draw(
        token_dataset(lengths, label, extra_keys=["attention_mask"], ids_types=ids_types)
    )
    options = {
        "return_position_ids": draw(st.booleans()),
        "separator_id": draw(st.sampled_from([-100, 0, 7])),
        "return_flash_attn_kwargs": draw(st.booleans()),
        "return_seq_idx": draw(st.booleans()),
        "position_ids_start": draw(st.sampled_from([0, 2, 5])),
        "return_tensors": draw(st.sampled_from(["pt", "np"])),
    }
    return dataset, indices, options, draw(st.sampled_from([None, -1, 9]))


@SETTINGS
@given(case=flattening_case())
def test_flattening_arrow_equals_rows_and_transformers(case):
    dataset, indices, options, call_separator = case
    batch, rows = batch_of(dataset, indices)
    # fastcollate raises for empty sequences and label / input length mismatches, which
    # transformers packs into a batch whose labels and input_ids disagree.
    divergent = any(
        not r["input_ids"] or len(r.get("labels", r["input_ids"])) != len(r["input_ids"])
        for r in rows
    )
    check(
        lambda: (
            lambda b: fastcollate.DataCollatorWithFlattening(**options)(
                b, separator_id=call_separator
            )
        ),
        lambda: flattening_as_5_24(
            lambda r: transformers.DataCollatorWithFlattening(**options)(
                r, separator_id=call_separator
            )
        ),
        batch,
        rows,
        divergent=divergent,
    )


@pytest.mark.parametrize("labels", [False, True])
@pytest.mark.parametrize("return_tensors", ["pt", "np"])
@settings(deadline=None, max_examples=examples(10))
@given(indices=st.sampled_from([[0, 1, 2], [1, 0, 3, 2], [1, 3], [2, 1]]))
def test_flattening_arrow_leaves_out_empty_rows_as_the_row_path_does(
    labels, return_tensors, indices
):
    # transformers 5.24 leaves rows with empty input_ids out, labels and all; the Arrow path
    # does the same from Arrow storage (a batch of empty rows alone is the row path's error).
    columns = {"input_ids": [[5, 6], [], [7], []], "attention_mask": [[1, 1], [], [1], []]}
    if labels:
        columns["labels"] = [[1, 2], [9], [3], []]
    dataset = datasets.Dataset.from_dict(columns)
    options = {
        "return_position_ids": True,
        "return_seq_idx": True,
        "return_flash_attn_kwargs": True,
        "return_tensors": return_tensors,
    }
    batch, rows = batch_of(dataset, indices)
    check(
        lambda: fastcollate.DataCollatorWithFlattening(**options),
        lambda: flattening_as_5_24(transformers.DataCollatorWithFlattening(**options)),
        batch,
        rows,
        native=any(row["input_ids"] for row in rows),
    )


def test_flattening_falls_back_to_rows_for_floats_and_odd_options():
    # Float ids are truncated by the row path; non-int options are the row path's to judge.
    floats = datasets.Dataset.from_dict(
        {"input_ids": [[1.5, 2.7], [-3.9]], "labels": [[1, 2], [3]]},
        features=datasets.Features(
            {
                "input_ids": datasets.List(datasets.Value("float32")),
                "labels": datasets.List(datasets.Value("int64")),
            }
        ),
    )
    ints = datasets.Dataset.from_dict({"input_ids": [[5, 6, 7], [8, 9]]})
    for dataset, options in [
        (floats, {}),
        (ints, {"separator_id": np.int64(-5)}),
        (ints, {"position_ids_start": 2**63 - 2}),
    ]:
        batch, rows = batch_of(dataset, [1, 0])
        collator = fastcollate.DataCollatorWithFlattening(return_tensors="np", **options)
        ours, ours_err = outcome(collator, batch)
        expected, expected_err = outcome(collator, rows)
        if expected_err is not None:
            assert type(ours_err) is type(expected_err) and str(ours_err) == str(expected_err)
        else:
            assert_same_batch(ours, expected)


# --- DataCollatorForLanguageModeling ------------------------------------------------------------

MASK_PROBABILITIES = [(0.8, 0.1), (1.0, 0.0), (0.0, 1.0), (0.5, 0.4)]


@st.composite
def language_modeling_case(draw):
    lengths = draw_lengths(draw, equal=draw(st.booleans()), low=1)
    extra_keys = sorted(
        draw(st.sets(st.sampled_from(["attention_mask", "token_type_ids", "special_tokens_mask"])))
    )
    dataset, indices = draw(token_dataset(lengths, extra_keys=extra_keys))
    mask_replace_prob, random_replace_prob = draw(st.sampled_from(MASK_PROBABILITIES))
    options = {
        "mlm": draw(st.booleans()),
        "mlm_probability": draw(st.sampled_from([0.15, 0.5, 1.0])),
        "mask_replace_prob": mask_replace_prob,
        "random_replace_prob": random_replace_prob,
        "pad_to_multiple_of": draw(st.one_of(st.none(), st.integers(1, 8))),
        "return_tensors": draw(st.sampled_from(["pt", "np"])),
        "seed": draw(st.integers(0, 2**16)),
    }
    return dataset, indices, options, draw(st.sampled_from(["left", "right"]))


@SETTINGS
@given(case=language_modeling_case())
def test_language_modeling_arrow_equals_rows_and_transformers(bert_tokenizer, case):
    dataset, indices, options, side = case
    tokenizer = with_side(bert_tokenizer, side)
    batch, rows = batch_of(dataset, indices)
    # A fresh seeded collator per call: the same masks on every path (transformers' own masks
    # with mask_rng="torch").
    check(
        lambda: fastcollate.DataCollatorForLanguageModeling(tokenizer, **options, mask_rng="torch"),
        lambda: transformers.DataCollatorForLanguageModeling(tokenizer, **options),
        batch,
        rows,
    )
    native = fastcollate.DataCollatorForLanguageModeling
    assert_same_batch(
        native(tokenizer, **options)(batch), native(tokenizer, **options)(copy.deepcopy(rows))
    )


# --- DataLoader, Trainer hook -------------------------------------------------------------------


def seq2seq_dataset(rows=23, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 12, rows)
    label_lengths = rng.integers(1, 9, rows)
    features = datasets.Features(
        {
            "input_ids": datasets.List(datasets.Value("int32")),
            "attention_mask": datasets.List(datasets.Value("int8")),
            "labels": datasets.List(datasets.Value("int64")),
        }
    )
    pieces = [
        datasets.Dataset.from_dict(
            {
                "input_ids": [rng.integers(1000, 30000, n).tolist() for n in part],
                "attention_mask": [[1] * n for n in part],
                "labels": [rng.integers(0, 60, n).tolist() for n in label_part],
            },
            features=features,
        )
        for part, label_part in zip(
            np.array_split(lengths, 2), np.array_split(label_lengths, 2), strict=True
        )
    ]
    return datasets.concatenate_datasets(pieces).shuffle(seed=seed).select(range(3, rows))


def same_length_labels(dataset):
    return dataset.map(lambda row: {"labels": [i % 5 for i in row["input_ids"]]})


FAMILY = {
    "token_classification": (
        lambda lib, tok: lib.DataCollatorForTokenClassification(tok, pad_to_multiple_of=4),
        same_length_labels,
    ),
    "seq2seq": (lambda lib, tok: lib.DataCollatorForSeq2Seq(tok, pad_to_multiple_of=4), None),
    "flattening": (
        lambda lib, tok: lib.DataCollatorWithFlattening(return_flash_attn_kwargs=True),
        same_length_labels,
    ),
    "language_modeling": (
        lambda lib, tok: lib.DataCollatorForLanguageModeling(
            tok, seed=3, **({"mask_rng": "torch"} if lib is fastcollate else {})
        ),
        lambda dataset: dataset.remove_columns("labels"),
    ),
}


def loader_batches(dataset, collator, **kwargs):
    generator = torch.Generator().manual_seed(7)
    loader = DataLoader(
        dataset, batch_size=4, shuffle=True, generator=generator, collate_fn=collator, **kwargs
    )
    return [dict(batch) for batch in loader]


@pytest.mark.parametrize("name", FAMILY)
@pytest.mark.parametrize("side", ["left", "right"])
def test_dataloader_batches_match_the_row_path_and_transformers(bert_tokenizer, name, side):
    make, prepare = FAMILY[name]
    tokenizer = with_side(bert_tokenizer, side)
    dataset = seq2seq_dataset()
    if prepare is not None:
        dataset = prepare(dataset)
    with counting_row_reads() as reads:
        ours = loader_batches(ArrowBatches(dataset), make(fastcollate, tokenizer), num_workers=0)
    assert reads == []
    rows = loader_batches(dataset, make(fastcollate, tokenizer), num_workers=0)
    theirs = loader_batches(dataset, make(transformers, tokenizer), num_workers=0)
    assert len(ours) == len(rows) == len(theirs) == 5
    for a, b, c in zip(ours, rows, theirs, strict=True):
        assert_same_batch(a, b)
        assert_same_batch(a, c)


@pytest.mark.parametrize("name", FAMILY)
def test_family_collators_accept_arrow_batches_unless_subclassed(bert_tokenizer, name):
    make, _ = FAMILY[name]
    collator = make(fastcollate, bert_tokenizer)
    assert collator.accepts_arrow_batches is True and accepts_arrow_batches(collator)
    dataset = seq2seq_dataset(rows=8)
    assert isinstance(wrap_for_trainer(dataset, collator), ArrowBatches)
    assert not accepts_arrow_batches(make(transformers, bert_tokenizer))

    class RowsOnly(type(collator)):
        def __call__(self, features, *args, **kwargs):
            return super().__call__(list(features), *args, **kwargs)

    subclass = copy.copy(collator)
    subclass.__class__ = RowsOnly
    assert subclass.accepts_arrow_batches is False
    assert wrap_for_trainer(dataset, subclass) is dataset


def test_empty_and_bad_batches_raise_as_for_rows(bert_tokenizer):
    dataset = datasets.Dataset.from_dict({"input_ids": [[1, 2]], "labels": [[3, 4]]})
    wrapper = ArrowBatches(dataset)
    no_ids = ArrowBatches(dataset, ["labels"])
    for make, _ in FAMILY.values():
        collator = make(fastcollate, bert_tokenizer)
        for batch, rows in [
            (wrapper.__getitems__([]), []),
            (no_ids.__getitems__([0]), no_ids.__getitems__([0]).rows()),
        ]:
            ours, ours_err = outcome(collator, batch)
            _, expected_err = outcome(collator, rows)
            assert expected_err is not None and ours is None
            assert type(ours_err) is type(expected_err) and str(ours_err) == str(expected_err)
