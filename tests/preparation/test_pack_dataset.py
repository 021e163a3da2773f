"""`fastcollate.trl.pack_dataset` against TRL 1.16's
`trl.data_utils.pack_dataset`: hypothesis-generated datasets (ragged lengths, empty and
over-long rows, null rows, several list columns of ints, floats and bools, list and large_list
offsets, batch sizes that do not divide the row count, tiny seq_length), for every strategy,
compared on values, features and format. Then the cases where fastcollate deliberately differs,
and bad input."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.support.hypothesis_profiles import examples

os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")

datasets = pytest.importorskip("datasets")
pa = pytest.importorskip("pyarrow")
trl_data_utils = pytest.importorskip("trl.data_utils")

from fastcollate.trl import pack_dataset  # noqa: E402

pytestmark = pytest.mark.parity

datasets.disable_progress_bars()
datasets.disable_caching()

SETTINGS = settings(
    max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
STRATEGIES = ("bfd", "bfd_split", "wrapped")
VALUE_TYPES = {
    "int64": (pa.int64(), st.integers(-(2**40), 2**40)),
    "int32": (pa.int32(), st.integers(-(2**31), 2**31 - 1)),
    "int8": (pa.int8(), st.integers(-128, 127)),
    "float32": (pa.float32(), st.floats(-1e3, 1e3, width=32, allow_nan=False)),
    "float64": (pa.float64(), st.floats(allow_nan=False, allow_infinity=False)),
    "bool": (pa.bool_(), st.booleans()),
}


@st.composite
def packable_datasets(draw, allow_nulls: bool = True):
    rows = draw(st.integers(1, 30))
    lengths = draw(
        st.lists(st.one_of(st.integers(1, 6), st.integers(0, 14)), min_size=rows, max_size=rows)
    )
    null_rows = set()
    if allow_nulls and draw(st.booleans()):
        null_rows = set(draw(st.lists(st.integers(0, rows - 1), max_size=3)))
    large = draw(st.booleans())
    names = draw(
        st.lists(
            st.sampled_from(["input_ids", "attention_mask", "labels", "position_ids", "w"]),
            min_size=1,
            max_size=3,
            unique=True,
        )
    )
    arrays = []
    for _ in names:
        type_name = draw(st.sampled_from(sorted(VALUE_TYPES)))
        value_type, values = VALUE_TYPES[type_name]
        value_nulls = allow_nulls and draw(st.integers(0, 4)) == 0
        element = st.one_of(st.none(), values) if value_nulls else values
        column = [
            None if row in null_rows else draw(st.lists(element, min_size=n, max_size=n))
            for row, n in enumerate(lengths)
        ]
        list_type = pa.large_list(value_type) if large else pa.list_(value_type)
        arrays.append(pa.array(column, type=list_type))
    table = pa.Table.from_arrays(arrays, names=names)
    dataset = datasets.Dataset(table)
    if draw(st.booleans()):  # an indices mapping, as after select / shuffle
        order = draw(st.permutations(range(rows)))
        dataset = dataset.select(order[: draw(st.integers(1, rows))])
    return dataset


def trl_pack(dataset, seq_length, strategy, map_kwargs=None):
    return trl_data_utils.pack_dataset(dataset, seq_length, strategy, map_kwargs)


def assert_same(ours, theirs):
    ours.data.table.validate(full=True)  # offsets in bounds: some arrays are built unchecked
    assert ours.to_dict() == theirs.to_dict()
    assert ours.features == theirs.features
    assert ours.format == theirs.format
    assert ours.data.schema.types == theirs.data.schema.types
    assert ours.column_names == theirs.column_names


def batches_all_empty(dataset, batch_size):
    lengths = [len(row or []) for row in dataset.with_format("arrow")[:].column(0).to_pylist()]
    step = batch_size or len(lengths)
    return any(not any(lengths[i : i + step]) for i in range(0, len(lengths), step))


@SETTINGS
@given(
    dataset=packable_datasets(),
    seq_length=st.integers(1, 9),
    strategy=st.sampled_from(STRATEGIES),
    batch_size=st.sampled_from([None, 1, 2, 3, 5, 7, 1000]),
)
def test_equal_to_trl(dataset, seq_length, strategy, batch_size):
    before = dataset.to_dict(), dataset.features, dataset._fingerprint
    map_kwargs = {} if batch_size == 1000 else {"batch_size": batch_size}
    ours = pack_dataset(dataset, seq_length, strategy, map_kwargs)
    assert (dataset.to_dict(), dataset.features, dataset._fingerprint) == before
    try:
        theirs = trl_pack(dataset, seq_length, strategy, map_kwargs)
    except pa.ArrowNotImplementedError:
        # TRL's bfd crashes on a batch whose rows are all empty (`pc.take(table, [])`);
        # fastcollate packs the other batches. Checked in test_all_empty_batch below.
        assert strategy != "wrapped" and batches_all_empty(dataset, batch_size)
        event("TRL crashed on an all-empty batch")
        return
    event(f"compared: {strategy}")
    assert_same(ours, theirs)


@settings(max_examples=examples(40), deadline=None)
@given(
    dataset=packable_datasets(allow_nulls=False),
    strategy=st.sampled_from(STRATEGIES),
    format_type=st.sampled_from([None, "numpy", "torch", "arrow"]),
)
def test_format_is_restored_like_trl(dataset, strategy, format_type):
    columns = dataset.column_names[:1] if len(dataset.column_names) > 1 else None
    dataset = dataset.with_format(format_type, columns=columns)
    ours = pack_dataset(dataset, 4, strategy)
    try:
        theirs = trl_pack(dataset, 4, strategy)
    except pa.ArrowNotImplementedError:
        # TRL's bfd crashes on an all-empty batch (see test_equal_to_trl).
        assert strategy != "wrapped" and batches_all_empty(dataset, 1000)
        return
    assert ours.format == theirs.format
    assert_same(ours.with_format(None), theirs.with_format(None))


def test_trl_docstring_example():
    dataset = datasets.Dataset.from_dict(
        {
            "input_ids": [[1, 2, 3, 4, 5], [6, 7], [8, 9, 10], [11]],
            "attention_mask": [[1, 1, 1, 0, 0], [1, 0], [1, 1, 0], [1]],
        }
    )
    assert pack_dataset(dataset, 4, "bfd")[:] == {
        "input_ids": [[1, 2, 3, 4], [8, 9, 10, 11], [6, 7]],
        "attention_mask": [[1, 1, 1, 0], [1, 1, 0, 1], [1, 0]],
        "seq_lengths": [[4], [3, 1], [2]],
    }
    assert pack_dataset(dataset, 4, "bfd_split")[:] == {
        "input_ids": [[1, 2, 3, 4], [8, 9, 10, 5], [6, 7, 11]],
        "attention_mask": [[1, 1, 1, 0], [1, 1, 0, 0], [1, 0, 1]],
        "seq_lengths": [[4], [3, 1], [2, 1]],
    }


def lengths_dataset(count, seed=0, large=False):
    rng = np.random.default_rng(seed)
    lengths = np.minimum(rng.lognormal(np.log(60), 0.7, count).astype(int), 200)
    ids = [list(range(n)) for n in lengths]
    kind = pa.large_list(pa.int32()) if large else pa.list_(pa.int32())
    table = pa.table(
        {
            "input_ids": pa.array(ids, kind),
            "attention_mask": pa.array([[1] * n for n in lengths], kind),
        }
    )
    return datasets.Dataset(table)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("large", [False, True])
def test_many_batches_and_chunks(strategy, large):
    # 2,500 rows: three map batches, the last one short; a chunked table as a cache would be.
    dataset = lengths_dataset(2500, large=large)
    chunked = datasets.Dataset(
        pa.Table.from_batches(dataset.data.table.to_batches(max_chunksize=333))
    )
    assert_same(pack_dataset(chunked, 256, strategy), trl_pack(dataset, 256, strategy))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_outputs_past_32_mib_are_trls(strategy):
    # 4.6M int64 values (37 MiB) in 1,000-row record batches: the core writes the packed copy
    # from several threads into a buffer it asks 4 KiB pages for (`core::fresh_pages`), never
    # zeroed first; every value distinct, so a byte out of place or left unwritten shows.
    rng = np.random.default_rng(3)
    lengths = np.minimum(rng.lognormal(np.log(180), 0.6, 25_000).astype(np.int64), 700)
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = pa.array(np.arange(int(offsets[-1]), dtype=np.int64) * 7 - 2**40)
    column = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values)
    table = pa.Table.from_batches(pa.table({"input_ids": column}).to_batches(max_chunksize=1000))
    assert table.column("input_ids").num_chunks == 25 and values.nbytes > 32 << 20
    dataset = datasets.Dataset(table)
    assert_same(pack_dataset(dataset, 2048, strategy), trl_pack(dataset, 2048, strategy))


@SETTINGS
@given(
    dataset=packable_datasets(),
    cuts=st.lists(st.integers(0, 30), max_size=6),
    seq_length=st.integers(1, 9),
    strategy=st.sampled_from(STRATEGIES),
    batch_size=st.sampled_from([1000, 2, 3, 5]),
)
def test_chunked_tables_are_read_in_place_like_trl(dataset, cuts, seq_length, strategy, batch_size):
    # The table cut into chunks anywhere (empty chunks, chunks that are slices with an offset,
    # batch boundaries inside chunks): the core reads each chunk's values where they lie.
    table = dataset.with_format("arrow")[:]
    edges = sorted({0, table.num_rows, *(min(cut, table.num_rows) for cut in cuts)})
    pieces = [table.slice(a, b - a) for a, b in zip(edges[:-1], edges[1:], strict=True)]
    pieces.insert(len(pieces) // 2, table.slice(0, 0))
    chunked = pa.concat_tables(pieces)
    map_kwargs = {"batch_size": batch_size}
    ours = pack_dataset(datasets.Dataset(chunked), seq_length, strategy, map_kwargs)
    try:
        theirs = trl_pack(datasets.Dataset(table), seq_length, strategy, map_kwargs)
    except pa.ArrowNotImplementedError:  # TRL on an all-empty batch: see test_equal_to_trl
        assert strategy != "wrapped" and batches_all_empty(dataset, batch_size)
        return
    assert_same(ours, theirs)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_num_proc_shards_like_map(strategy):
    dataset = lengths_dataset(2300, seed=1)
    map_kwargs = {"num_proc": 2, "batch_size": 700, "desc": "packing"}
    assert_same(
        pack_dataset(dataset, 300, strategy, map_kwargs),
        trl_pack(dataset, 300, strategy, map_kwargs),
    )


def wrapped_sources(tmp_path):
    """One dataset as each source hands it over: `from_dict` (one chunk), a batched `map`'s
    output (300-row chunks), a Parquet file (250-row row groups, read into datasets' cache) and
    `save_to_disk` / `load_from_disk` (memory-mapped, 1,000-row record batches)."""
    base = lengths_dataset(2500, seed=4)
    from_dict = datasets.Dataset.from_dict(base.to_dict())
    mapped = from_dict.map(lambda batch: batch, batched=True, batch_size=300, writer_batch_size=300)
    base.to_parquet(tmp_path / "rows.parquet", batch_size=250)
    parquet = datasets.Dataset.from_parquet(
        str(tmp_path / "rows.parquet"), cache_dir=str(tmp_path / "cache")
    )
    base.with_format(None).save_to_disk(str(tmp_path / "saved"))
    saved = datasets.load_from_disk(str(tmp_path / "saved"))
    return {"from_dict": from_dict, "map": mapped, "parquet": parquet, "saved": saved}


@pytest.mark.parametrize("batch_size", [1000, 128, None])
def test_wrapped_from_every_source_is_trls(tmp_path, batch_size):
    # Map batches inside one chunk and map batches spanning chunks, packed rows straddling
    # chunk boundaries: equal to TRL's for every source.
    sources = wrapped_sources(tmp_path)
    assert sources["from_dict"].data.table.column(0).num_chunks == 1
    for name in ("map", "parquet", "saved"):
        assert sources[name].data.table.column(0).num_chunks > 2, name
    map_kwargs = {"batch_size": batch_size}
    for dataset in sources.values():
        ours = pack_dataset(dataset, 256, "wrapped", map_kwargs)
        assert_same(ours, trl_pack(dataset, 256, "wrapped", map_kwargs))


def values_in_place(packed_column, input_column):
    """(values read in place, values copied) of a packed column: a chunk's values are in place
    where they lie inside one of the input chunks' value buffers."""
    ranges = []
    for chunk in input_column.chunks:
        buffer = chunk.values.buffers()[1]
        ranges.append((buffer.address, buffer.address + buffer.size))
    in_place = copied = 0
    for chunk in packed_column.chunks:
        values = chunk.flatten()  # the values its rows hold (its child may hold more)
        width = values.type.bit_width // 8
        start = values.buffers()[1].address + values.offset * width
        end = start + len(values) * width
        if any(low <= start and end <= high for low, high in ranges):
            in_place += len(values)
        else:
            copied += len(values)
    return in_place, copied


@pytest.mark.parametrize("large", [False, True])
def test_wrapped_copies_only_rows_straddling_chunks(large):
    # 333-row chunks, 1,000-row map batches: every batch spans chunks, yet only the packed rows
    # that run over a chunk boundary (at most one per boundary) have their values copied.
    dataset = lengths_dataset(2500, seed=5, large=large)
    chunked = datasets.Dataset(
        pa.Table.from_batches(dataset.data.table.to_batches(max_chunksize=333))
    )
    ours = pack_dataset(chunked, 256, "wrapped")
    assert_same(ours, trl_pack(dataset, 256, "wrapped"))
    source = chunked.data.table.column("input_ids")
    in_place, copied = values_in_place(ours.data.table.column("input_ids"), source)
    assert in_place + copied == sum(len(row) for row in dataset["input_ids"])
    assert 0 < copied <= (source.num_chunks - 1) * 256
    assert in_place > 10 * copied


def test_wrapped_output_saves_and_pickles_like_trls(tmp_path):
    # The packed columns are slices of the input's buffers: written out, only their values go.
    import pickle

    dataset = wrapped_sources(tmp_path)["parquet"]
    ours = pack_dataset(dataset, 256, "wrapped", {"batch_size": 128})
    theirs = trl_pack(dataset, 256, "wrapped", {"batch_size": 128})
    ours.save_to_disk(str(tmp_path / "packed"))
    assert_same(datasets.load_from_disk(str(tmp_path / "packed")), theirs)
    assert_same(pickle.loads(pickle.dumps(ours)), theirs)


def test_wrapped_null_rows_hiding_values_across_chunks():
    # Null rows whose offsets still span values (Arrow allows it): those values are not part
    # of the row, so neither TRL's `flatten()` nor fastcollate packs them.
    offsets = pa.array([0, 5, 12, 20, 26, 33, 40, 41], pa.int32())
    mask = pa.array([False, True, False, False, True, False, False])
    column = pa.ListArray.from_arrays(offsets, pa.array(range(41), pa.int64()), mask=mask)
    table = pa.table({"input_ids": column})
    chunked = pa.Table.from_batches(table.to_batches(max_chunksize=2))
    for batch_size in (1000, 3):
        for seq_length in (3, 4, 100):
            map_kwargs = {"batch_size": batch_size}
            ours = pack_dataset(datasets.Dataset(chunked), seq_length, "wrapped", map_kwargs)
            theirs = trl_pack(datasets.Dataset(table), seq_length, "wrapped", map_kwargs)
            assert_same(ours, theirs)
            assert not any(value in {5, 6, 26} for row in ours["input_ids"] for value in row)


def test_strings_and_nested_values_take_the_arrow_path():
    dataset = datasets.Dataset.from_dict(
        {"t": [["a", "b", "c"], ["d"], ["e", "f"]], "n": [[[1], [2, 3], []], [[4]], [[5], [6]]]}
    )
    for strategy in STRATEGIES:
        assert_same(pack_dataset(dataset, 2, strategy), trl_pack(dataset, 2, strategy))


def test_class_label_feature_is_kept_like_map():
    features = datasets.Features(
        {
            "input_ids": datasets.List(datasets.Value("int64")),
            "tags": datasets.List(datasets.ClassLabel(names=["O", "B", "I"])),
        }
    )
    dataset = datasets.Dataset.from_dict(
        {"input_ids": [[1, 2], [3], [4, 5, 6]], "tags": [[0, 1], [2], [1, 1, 0]]},
        features=features,
    )
    ours = pack_dataset(dataset, 4, "bfd")
    assert_same(ours, trl_pack(dataset, 4, "bfd"))
    assert isinstance(ours.features["tags"].feature, datasets.ClassLabel)


def test_dataset_dict_and_iterable():
    dataset = lengths_dataset(1200, seed=2)
    splits = datasets.DatasetDict({"train": dataset, "test": dataset.select(range(50))})
    for strategy in STRATEGIES:
        ours, theirs = pack_dataset(splits, 128, strategy), trl_pack(splits, 128, strategy)
        assert list(ours) == list(theirs)
        for name in ours:
            assert_same(ours[name], theirs[name])
        iterable = dataset.to_iterable_dataset()
        ours = pack_dataset(iterable, 128, strategy, {"batch_size": 300})
        theirs = trl_pack(iterable, 128, strategy, {"batch_size": 300})
        assert list(ours) == list(theirs)


@pytest.mark.parametrize("strategy", ["bfd", "bfd_split"])
def test_whole_dataset_fills_imdb_like_rows_past_99_9_percent(strategy):
    from fastcollate.bench.trl_workload import filled_share, imdb_like_dataset

    dataset = imdb_like_dataset(50_000)
    whole = pack_dataset(dataset, 2048, strategy, whole_dataset=True)
    per_batch = pack_dataset(dataset, 2048, strategy)
    assert filled_share(whole, 2048) >= 0.999 > filled_share(per_batch, 2048)
    # Every token once: the same multiset of sequences, each row within seq_length.
    assert sorted(np.concatenate(whole["seq_lengths"]).tolist()) == sorted(
        np.concatenate(per_batch["seq_lengths"]).tolist()
    )
    assert max(map(len, whole["input_ids"])) <= 2048


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lengths=st.lists(st.integers(0, 40), min_size=1, max_size=60),
    seq_length=st.integers(1, 50),
    strategy=st.sampled_from(["bfd", "bfd_split"]),
)
def test_whole_dataset_places_every_value_once_within_seq_length(lengths, seq_length, strategy):
    values = [list(range(1000 * row, 1000 * row + n)) for row, n in enumerate(lengths)]
    dataset = datasets.Dataset.from_dict({"input_ids": values})
    whole = pack_dataset(dataset, seq_length, strategy, whole_dataset=True)
    rows = whole["input_ids"]
    assert all(0 < len(row) <= seq_length for row in rows)
    kept = [v[:seq_length] for v in values] if strategy == "bfd" else values
    assert sorted(x for row in rows for x in row) == sorted(x for v in kept for x in v)
    for row, pieces in zip(rows, whole["seq_lengths"], strict=True):
        assert sum(pieces) == len(row)


def test_whole_dataset_packs_fuller():
    dataset = lengths_dataset(20000, seed=3)
    per_batch = pack_dataset(dataset, 2048, "bfd")
    whole = pack_dataset(dataset, 2048, "bfd", whole_dataset=True)
    tokens = sum(len(row) for row in dataset["input_ids"])
    assert sum(map(len, whole["input_ids"])) == sum(map(len, per_batch["input_ids"])) == tokens
    # Every row full but the last: as few rows as the tokens allow.
    assert len(whole) == -(-tokens // 2048)
    assert len(whole) < len(per_batch)
    assert sorted(np.concatenate(whole["seq_lengths"]).tolist()) == sorted(
        len(row) for row in dataset["input_ids"]
    )


# Where fastcollate differs from TRL on purpose (TRL crashes).


def test_all_empty_batch():
    dataset = datasets.Dataset.from_dict({"input_ids": [[], [], [1, 2], [3]]})
    with pytest.raises(pa.ArrowNotImplementedError):
        trl_pack(dataset, 4, "bfd", {"batch_size": 2})
    ours = pack_dataset(dataset, 4, "bfd", {"batch_size": 2})
    assert ours[:] == {"input_ids": [[1, 2, 3]], "seq_lengths": [[2, 1]]}


def test_empty_dataset():
    dataset = datasets.Dataset.from_dict({"input_ids": [[1]]}).select([])
    with pytest.raises(ValueError, match="seq_lengths"):
        trl_pack(dataset, 4, "bfd")
    ours = pack_dataset(dataset, 4, "bfd")
    assert len(ours) == 0 and ours.column_names == ["input_ids", "seq_lengths"]
    assert_same(pack_dataset(dataset, 4, "wrapped"), trl_pack(dataset, 4, "wrapped"))


# Bad input: a clear error naming the column and row, the input untouched.


def test_non_list_column_is_a_type_error():
    dataset = datasets.Dataset.from_dict({"input_ids": [[1], [2, 3]], "label": [0, 1]})
    with pytest.raises(TypeError):
        trl_pack(dataset, 4, "bfd")
    with pytest.raises(TypeError, match="'label'"):
        pack_dataset(dataset, 4, "bfd")


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_ragged_columns_name_column_and_row(strategy):
    dataset = datasets.Dataset.from_dict(
        {"input_ids": [[1], [2, 3], [4]], "attention_mask": [[1], [1, 1], [1, 1]]}
    )
    before = dataset.to_dict()
    with pytest.raises(ValueError):
        trl_pack(dataset, 4, strategy)
    with pytest.raises(ValueError, match=r"'attention_mask'.*row 2"):
        pack_dataset(dataset, 4, strategy)
    assert dataset.to_dict() == before


def test_list_and_large_list_mixed_is_a_value_error():
    table = pa.table(
        {
            "a": pa.array([[1], [2, 3]], pa.list_(pa.int64())),
            "b": pa.array([[1], [2, 3]], pa.large_list(pa.int64())),
        }
    )
    dataset = datasets.Dataset(table)
    with pytest.raises(ValueError):
        trl_pack(dataset, 4, "bfd")
    with pytest.raises(ValueError, match="'b'"):
        pack_dataset(dataset, 4, "bfd")


@pytest.mark.parametrize(
    ("seq_length", "error"),
    [(0, ValueError), (-3, ValueError), (2.0, TypeError), (True, TypeError), ("4", TypeError)],
)
def test_bad_seq_length(seq_length, error):
    dataset = datasets.Dataset.from_dict({"input_ids": [[1], [2, 3]]})
    with pytest.raises(error, match="seq_length"):
        pack_dataset(dataset, seq_length)
    assert pack_dataset(dataset, np.int64(2))[:] == {
        "input_ids": [[2, 3], [1]],
        "seq_lengths": [[2], [1]],
    }


def test_bad_options():
    dataset = datasets.Dataset.from_dict({"input_ids": [[1], [2, 3]], "seq_lengths": [[1], [2, 2]]})
    with pytest.raises(ValueError, match="Invalid packing strategy"):
        pack_dataset(dataset, 4, "first_fit")
    with pytest.raises(ValueError, match="'seq_lengths'"):
        pack_dataset(dataset, 4, "bfd")
    assert_same(pack_dataset(dataset, 4, "wrapped"), trl_pack(dataset, 4, "wrapped"))
    with pytest.raises(NotImplementedError, match="remove_columns"):
        pack_dataset(dataset, 4, "wrapped", {"remove_columns": ["seq_lengths"]})
    with pytest.raises(TypeError, match="batched"):
        pack_dataset(dataset, 4, "wrapped", {"batched": False})
    with pytest.raises(TypeError, match="bogus"):
        pack_dataset(dataset, 4, "wrapped", {"bogus": 1})
    with pytest.raises(TypeError, match="list"):
        pack_dataset([{"input_ids": [1]}], 4)
    with pytest.raises(ValueError, match="whole_dataset"):
        pack_dataset(dataset.to_iterable_dataset(), 4, whole_dataset=True)
