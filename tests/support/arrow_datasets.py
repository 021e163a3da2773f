"""Arrow datasets for the hypothesis tests of the Arrow path: value types, list features, and a
dataset cut into chunks then shuffled / selected / filtered / sorted / flattened."""

from __future__ import annotations

import datasets
from hypothesis import assume
from hypothesis import strategies as st

INT_TYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
TRANSFORMS = ("none", "shuffle", "select", "select_range", "filter", "sort", "flatten")


def sequence_feature(value_type: str, list_kind: str, length: int | None = None):
    value = datasets.Value(value_type)
    if list_kind == "large_list":
        return datasets.LargeList(value)
    if list_kind == "fixed":
        return datasets.List(value, length=length)
    return datasets.List(value)


@st.composite
def transformed(draw, data: dict, features: datasets.Features):
    """`data` as a dataset of 1-3 Arrow chunks (some may be empty), then shuffled / selected /
    filtered / sorted / flattened, once or twice in a row."""
    rows = len(next(iter(data.values())))
    cuts = sorted(draw(st.lists(st.integers(0, rows), max_size=2)))
    bounds = [0, *cuts, rows]
    pieces = [
        datasets.Dataset.from_dict({k: v[a:b] for k, v in data.items()}, features=features)
        for a, b in zip(bounds, bounds[1:], strict=False)
    ]
    dataset = datasets.concatenate_datasets(pieces) if len(pieces) > 1 else pieces[0]
    for transform in draw(st.lists(st.sampled_from(TRANSFORMS), min_size=1, max_size=2)):
        dataset = draw(transform_once(dataset, transform))
    return dataset


@st.composite
def transform_once(draw, dataset, transform):
    rows = len(dataset)
    if transform == "shuffle":
        dataset = dataset.shuffle(seed=draw(st.integers(0, 2**16)))
    elif transform == "select":
        picks = draw(st.lists(st.integers(0, rows - 1), min_size=1, max_size=2 * rows))
        dataset = dataset.select(picks)
    elif transform == "select_range":
        start = draw(st.integers(0, rows - 1))
        dataset = dataset.select(range(start, draw(st.integers(start + 1, rows))))
    elif transform == "filter":
        keep = draw(st.lists(st.booleans(), min_size=rows, max_size=rows))
        assume(any(keep))
        dataset = dataset.filter(lambda _, i: keep[i], with_indices=True)
    elif transform == "sort":
        dataset = dataset.sort("order")
    elif transform == "flatten":
        dataset = dataset.shuffle(seed=1).flatten_indices()
    return dataset
