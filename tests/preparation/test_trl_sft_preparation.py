"""`fastcollate.trl.prepare_tokenized_sft_dataset` against TRL 1.16's own preparation code.

TRL's post-tokenization steps (labels from the masks, truncation, filtering, packing, shuffling)
are closures inside `SFTTrainer._prepare_dataset`, so the reference here is that method itself,
called unbound on a tokenized dataset: with `input_ids` present it skips tokenizing and reads
only `completion_only_loss` from the trainer and a few `SFTConfig` fields. Hypothesis generates
datasets (ragged rows, empty and over-long rows, masks of several types and lengths, an
existing `labels` column, extra columns, list and large_list offsets, shuffled and chunked
tables, formats) and every option; values, column order, features and format must match.
Then the cases where fastcollate deliberately differs, and bad input."""

from __future__ import annotations

import os
import types

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.hypothesis_profiles import examples

os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")

datasets = pytest.importorskip("datasets")
pa = pytest.importorskip("pyarrow")
sft_trainer = pytest.importorskip("trl.trainer.sft_trainer")

from fastcollate.trl import prepare_tokenized_sft_dataset  # noqa: E402

pytestmark = pytest.mark.parity

datasets.disable_progress_bars()
datasets.disable_caching()

SETTINGS = settings(
    max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
ID_TYPES = [pa.int64(), pa.int32(), pa.int16(), pa.uint16()]
MASK_TYPES = [pa.int64(), pa.int8(), pa.bool_(), pa.float32()]


def trl_prepare(
    dataset,
    *,
    completion_only_loss=None,
    max_length=1024,
    truncation_mode="keep_start",
    packing=False,
    packing_strategy="bfd",
    shuffle_dataset=False,
    seed=42,
    dataset_num_proc=None,
):
    """TRL's `SFTTrainer._prepare_dataset` on a tokenized dataset, with `completion_only_loss`
    decided as `SFTTrainer.__init__` decides it."""
    if completion_only_loss is None:
        names = dataset.column_names
        completion_only_loss = "prompt" in names and "completion" in names
    trainer = types.SimpleNamespace(completion_only_loss=completion_only_loss)
    args = types.SimpleNamespace(
        dataset_num_proc=dataset_num_proc,
        max_length=max_length,
        truncation_mode=truncation_mode,
        shuffle_dataset=shuffle_dataset,
        seed=seed,
        packing_strategy=packing_strategy,
    )
    return sft_trainer.SFTTrainer._prepare_dataset(
        trainer, dataset, None, args, packing, None, "train"
    )


def assert_same_dataset(ours, theirs):
    assert type(ours) is type(theirs)
    assert ours.column_names == theirs.column_names
    assert ours.features == theirs.features
    assert ours.format == theirs.format
    assert ours.with_format(None)[:] == theirs.with_format(None)[:]


def list_array(rows, value_type, large):
    kind = pa.large_list(value_type) if large else pa.list_(value_type)
    return pa.array(rows, type=kind)


@st.composite
def tokenized_datasets(draw):
    rows = draw(st.integers(1, 25))
    lengths = draw(
        st.lists(st.one_of(st.integers(1, 6), st.integers(0, 14)), min_size=rows, max_size=rows)
    )
    large = draw(st.booleans())
    ids_type = draw(st.sampled_from(ID_TYPES))
    ids = [draw(st.lists(st.integers(0, 300), min_size=n, max_size=n)) for n in lengths]
    columns = {"input_ids": list_array(ids, ids_type, large)}

    def mask_rows(value_type):
        out = []
        for n in lengths:
            # Mostly as long as the ids; sometimes shorter or longer (TRL zips them).
            size = draw(st.one_of(st.just(n), st.integers(0, 15)))
            if pa.types.is_boolean(value_type):
                values = st.booleans()
            elif pa.types.is_floating(value_type):
                values = st.sampled_from([0.0, 1.0, 0.5, -2.0])
            else:
                values = st.sampled_from([0, 1, 1, 2])
            out.append(draw(st.lists(values, min_size=size, max_size=size)))
        return out

    for name in ("completion_mask", "assistant_masks"):
        if draw(st.booleans()):
            value_type = draw(st.sampled_from(MASK_TYPES))
            columns[name] = list_array(mask_rows(value_type), value_type, large)
    if draw(st.integers(0, 4)) == 0:
        labels = [[draw(st.sampled_from([-100, token])) for token in row] for row in ids]
        columns["labels"] = list_array(
            labels, draw(st.sampled_from([pa.int64(), pa.int32()])), large
        )
    if draw(st.booleans()):
        columns["attention_mask"] = list_array([[1] * n for n in lengths], pa.int8(), large)
    if draw(st.booleans()):
        columns["prompt"] = pa.array([f"p{i}" for i in range(rows)])
        columns["completion"] = pa.array([f"c{i}" for i in range(rows)])
    if draw(st.booleans()):
        columns["row"] = pa.array(range(rows), type=pa.int64())
    names = list(columns)
    order = draw(st.permutations(names))
    table = pa.table({name: columns[name] for name in order})
    if rows > 2 and draw(st.booleans()):  # several chunks, as `map` writes them
        cut = draw(st.integers(1, rows - 1))
        table = pa.concat_tables([table.slice(0, cut), table.slice(cut)])
    dataset = datasets.Dataset(table)
    view = draw(st.sampled_from(["plain", "shuffled", "selected"]))
    if view == "shuffled":
        dataset = dataset.shuffle(seed=draw(st.integers(0, 100)))
    elif view == "selected" and rows > 1:
        dataset = dataset.select(range(1, rows))
    return dataset


option_sets = st.fixed_dictionaries(
    {
        "completion_only_loss": st.sampled_from([None, True, False]),
        "max_length": st.one_of(st.none(), st.integers(1, 15)),
        "truncation_mode": st.sampled_from(["keep_start", "keep_end"]),
        "packing": st.booleans(),
        "packing_strategy": st.sampled_from(["bfd", "bfd_split", "wrapped"]),
        "shuffle_dataset": st.booleans(),
        "seed": st.integers(0, 5),
    }
)


def run_both(dataset, options):
    try:
        theirs = trl_prepare(dataset, **options)
    except Exception as error:  # TRL's own failures: ours must fail as well
        with pytest.raises(Exception):  # noqa: B017
            prepare_tokenized_sft_dataset(dataset, **options)
        return type(error)
    before = dataset.with_format(None)[:]
    ours = prepare_tokenized_sft_dataset(dataset, **options)
    assert dataset.with_format(None)[:] == before
    assert_same_dataset(ours, theirs)
    return None


@SETTINGS
@given(tokenized_datasets(), option_sets)
def test_equal_to_trl(dataset, options):
    if options["packing"] and options["max_length"] is None:
        options["max_length"] = 8
    # TRL fails on some (its pack_dataset on a batch of empty rows); ours must fail then too.
    run_both(dataset, options)


@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tokenized_datasets(),
    st.sampled_from(["numpy", "torch", None]),
    st.booleans(),
    st.one_of(st.none(), st.integers(1, 10)),
)
def test_format_is_handed_on_like_trl(dataset, format_type, restrict, max_length):
    columns = None
    if restrict:
        columns = [name for name in dataset.column_names if name != "input_ids"] + ["input_ids"]
        columns = columns[-2:]
    dataset = dataset.with_format(format_type, columns=columns)
    assert run_both(dataset, {"max_length": max_length, "completion_only_loss": True}) is None


def test_the_usual_prompt_completion_case():
    rows = 2500  # more than one of `map`'s 1,000-row writer batches
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 40, rows)
    prompts = rng.integers(0, lengths + 1)
    ids = [rng.integers(0, 1000, n).tolist() for n in lengths]
    masks = [[0] * p + [1] * (n - p) for n, p in zip(lengths, prompts, strict=True)]
    dataset = datasets.Dataset.from_dict(
        {
            "prompt": ["x"] * rows,
            "completion": ["y"] * rows,
            "input_ids": ids,
            "completion_mask": masks,
        }
    )
    for max_length in (None, 10):
        options = {"max_length": max_length}
        ours = prepare_tokenized_sft_dataset(dataset, **options)
        assert_same_dataset(ours, trl_prepare(dataset, **options))
        assert len(ours) < rows or max_length is None  # some prompts fill max_length


def test_all_empty_rows_give_null_labels_like_trl():
    dataset = datasets.Dataset(pa.table({"input_ids": list_array([[], []], pa.int64(), False)}))
    assert run_both(dataset, {"max_length": None}) is None
    assert prepare_tokenized_sft_dataset(dataset, max_length=None).features["labels"] == (
        datasets.List(datasets.Value("null"))
    )
    assert run_both(dataset, {"max_length": 3}) is None


def test_empty_dataset_loses_its_masks_and_gets_no_labels_like_trl():
    table = pa.table(
        {
            "input_ids": list_array([], pa.int64(), False),
            "completion_mask": list_array([], pa.int64(), False),
        }
    )
    dataset = datasets.Dataset(table)
    assert run_both(dataset, {"completion_only_loss": True}) is None
    assert prepare_tokenized_sft_dataset(dataset, completion_only_loss=True).column_names == [
        "input_ids"
    ]


def test_class_label_feature_is_kept():
    features = datasets.Features(
        {
            "input_ids": datasets.List(datasets.Value("int32")),
            "topic": datasets.ClassLabel(names=["a", "b"]),
        }
    )
    dataset = datasets.Dataset.from_dict(
        {"input_ids": [[1, 2, 3], [4]], "topic": [1, 0]}, features=features
    )
    assert run_both(dataset, {"max_length": 2}) is None


def test_nothing_left_after_truncation():
    dataset = datasets.Dataset.from_dict({"input_ids": [[1, 2, 3]], "completion_mask": [[0, 0, 1]]})
    ours = prepare_tokenized_sft_dataset(dataset, completion_only_loss=True, max_length=2)
    assert len(ours) == 0
    assert_same_dataset(ours, trl_prepare(dataset, completion_only_loss=True, max_length=2))


def test_num_proc_is_followed_when_packing():
    dataset = datasets.Dataset.from_dict({"input_ids": [[i] * (i % 5 + 1) for i in range(40)]})
    options = {"packing": True, "max_length": 6, "dataset_num_proc": 3}
    assert run_both(dataset, options) is None


def test_long_rows_take_the_core_gather():
    # Values past int32 offsets of one chunk are not needed; a wide row checks the copy.
    dataset = datasets.Dataset.from_dict(
        {
            "input_ids": [list(range(5000)), list(range(3))],
            "assistant_masks": [[1] * 5000, [0, 1, 1]],
        }
    )
    for mode in ("keep_start", "keep_end"):
        assert run_both(dataset, {"max_length": 1000, "truncation_mode": mode}) is None


# Where fastcollate differs from TRL, on purpose.


def test_max_length_below_one_is_refused():
    dataset = datasets.Dataset.from_dict({"input_ids": [[1, 2, 3]]})
    # TRL slices with it: "keep_end" with 0 keeps every token.
    kept = trl_prepare(dataset, max_length=0, truncation_mode="keep_end")
    assert kept["input_ids"] == [[1, 2, 3]]
    for bad in (0, -1):
        with pytest.raises(ValueError, match="max_length must be a positive int"):
            prepare_tokenized_sft_dataset(dataset, max_length=bad)
    with pytest.raises(TypeError, match="max_length"):
        prepare_tokenized_sft_dataset(dataset, max_length=2.0)


def test_bad_options_raise_up_front():
    dataset = datasets.Dataset.from_dict({"input_ids": [[1, 2, 3]]})
    # TRL checks the truncation mode only when it truncates; it is checked always here.
    with pytest.raises(ValueError, match="truncation mode"):
        prepare_tokenized_sft_dataset(dataset, max_length=None, truncation_mode="middle")
    with pytest.raises(ValueError, match="packing strategy"):
        prepare_tokenized_sft_dataset(dataset, packing=True, packing_strategy="best")
    with pytest.raises(ValueError, match="max_length"):
        prepare_tokenized_sft_dataset(dataset, packing=True, max_length=None)


@pytest.mark.parametrize(
    "columns, error, message",
    [
        ({"text": ["a"]}, ValueError, "no 'input_ids' column"),
        ({"input_ids": [[1.5, 2.0]]}, TypeError, "column 'input_ids' holds double"),
        ({"input_ids": [[1, 2]], "labels": [["a", "b"]]}, TypeError, "column 'labels'"),
        ({"input_ids": [1, 2]}, TypeError, "column 'input_ids' is int"),
        ({"input_ids": [[1, 2], None]}, ValueError, "'input_ids' in row 1 is null"),
        ({"input_ids": [[1], [1, None]]}, ValueError, "'input_ids' in row 1 holds a null"),
        (
            {"input_ids": [[1, 2], [3]], "assistant_masks": [[1, 1], [None]]},
            ValueError,
            "'assistant_masks' in row 1 holds a null",
        ),
        (
            {"input_ids": [[1, 2]], "assistant_masks": [["a", "b"]]},
            TypeError,
            "column 'assistant_masks'",
        ),
    ],
)
def test_bad_input_names_column_and_row(columns, error, message):
    dataset = datasets.Dataset.from_dict(columns)
    before = dataset.data.table
    with pytest.raises(error, match=message):
        prepare_tokenized_sft_dataset(dataset, completion_only_loss=True)
    assert dataset.data.table is before


def test_not_a_dataset_and_custom_format():
    with pytest.raises(TypeError, match="datasets.Dataset"):
        prepare_tokenized_sft_dataset({"input_ids": [[1]]})
    dataset = datasets.Dataset.from_dict({"input_ids": [[1, 2]]}).with_transform(lambda x: x)
    with pytest.raises(ValueError, match="with_transform"):
        prepare_tokenized_sft_dataset(dataset)
