"""What the Arrow-path parity tests share: hypothesis token datasets in every value type and
padding options, a batch as an `ArrowBatch` and as the rows `datasets` gives, the check that
both give the same batch (or the same error), an IMDB-like tokenized dataset and a tiny BERT."""

from __future__ import annotations

import copy

import datasets
import numpy as np
import torch
import transformers
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from fastcollate import ArrowBatches
from tests.support.arrow_datasets import INT_TYPES, sequence_feature, transformed
from tests.support.compare import assert_same_batch
from tests.support.hypothesis_profiles import examples

SETTINGS = settings(
    max_examples=examples(30),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


FLOAT_TYPES = ("float16", "float32", "float64")


MASK_KEYS = ("token_type_ids", "attention_mask", "special_tokens_mask")


@st.composite
def padded_datasets(draw):
    """Token datasets as `dataset.map(tokenizer)` makes them, in every value type."""
    rows = draw(st.integers(1, 10))
    lengths = draw(st.lists(st.integers(0, 9), min_size=rows, max_size=rows))
    list_kind = draw(st.sampled_from(["list", "large_list"]))
    ids_type = draw(st.sampled_from(INT_TYPES))
    mask_type = draw(st.sampled_from(["int8", "int64", "bool"]))
    keys = sorted(draw(st.sets(st.sampled_from(MASK_KEYS))))
    label = draw(st.sampled_from([None, "int64", "int8", "bool", *FLOAT_TYPES]))
    data = {
        "input_ids": [
            draw(st.lists(st.integers(1, 120), min_size=n, max_size=n)) for n in lengths
        ]
    }
    features = {"input_ids": sequence_feature(ids_type, list_kind)}
    for key in keys:
        data[key] = [
            draw(st.lists(st.booleans() if mask_type == "bool" else st.integers(0, 1),
                          min_size=n, max_size=n))
            for n in lengths
        ]
        features[key] = sequence_feature(mask_type, list_kind)
    if label is not None:
        if label == "bool":
            values = st.booleans()
        elif label in FLOAT_TYPES:
            values = st.floats(-4, 4, allow_nan=False, width=16)
        else:
            values = st.integers(0, 9)
        data["label"] = draw(st.lists(values, min_size=rows, max_size=rows))
        features["label"] = datasets.Value(label)
    data["text"] = ["some text"] * rows  # left out by default, as Trainer removes it
    features["text"] = datasets.Value("string")
    data["order"] = draw(st.lists(st.integers(0, 5), min_size=rows, max_size=rows))
    features["order"] = datasets.Value("int16")
    dataset = draw(transformed(data, datasets.Features(features)))
    indices = draw(st.lists(st.integers(0, len(dataset) - 1), min_size=1, max_size=6))
    return dataset, indices


padding_options = st.fixed_dictionaries(
    {
        "padding": st.sampled_from([True, False, "longest", "max_length", "do_not_pad"]),
        "max_length": st.one_of(st.none(), st.integers(0, 12)),
        "pad_to_multiple_of": st.one_of(st.none(), st.integers(1, 8)),
    }
)


def batch_of(dataset, indices, columns=None):
    """The Arrow handle and the Python rows `datasets` gives for the same indices."""
    wrapper = ArrowBatches(dataset, columns)
    batch = wrapper.__getitems__(indices)
    rows = dataset.select_columns(wrapper.columns).__getitems__(indices)
    return batch, rows


def outcome(fn, arg):
    try:
        return fn(arg), None
    except (ValueError, TypeError, IndexError, RuntimeError) as err:
        return None, err


def assert_arrow_equals_rows(fn, batch, rows):
    """The Arrow path gives exactly what the row path gives: values, dtypes, shapes, key order,
    or the same error."""
    ours, ours_err = outcome(fn, batch)
    expected, expected_err = outcome(fn, copy.deepcopy(rows))
    if expected_err is not None:
        assert ours_err is not None, f"row path raised {expected_err!r}, Arrow path did not"
        assert type(ours_err) is type(expected_err)
        assert str(ours_err) == str(expected_err)
        return None
    assert ours_err is None, f"Arrow path raised {ours_err!r}, row path did not"
    assert_same_batch(ours, expected)
    return ours


def imdb_like(rows=64, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 40, rows)
    features = datasets.Features(
        {
            "input_ids": datasets.List(datasets.Value("int32")),
            "attention_mask": datasets.List(datasets.Value("int8")),
            "label": datasets.Value("int64"),
        }
    )
    pieces = [
        datasets.Dataset.from_dict(
            {
                "input_ids": [rng.integers(1, 30000, n).tolist() for n in part],
                "attention_mask": [[1] * n for n in part],
                "label": rng.integers(0, 2, len(part)).tolist(),
            },
            features=features,
        )
        for part in np.array_split(lengths, 3)
    ]
    return datasets.concatenate_datasets(pieces).shuffle(seed=seed)


def tiny_bert():
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=30522, hidden_size=8, num_hidden_layers=1, num_attention_heads=1,
        intermediate_size=8,
    )
    return transformers.BertForSequenceClassification(config)

