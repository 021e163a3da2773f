"""`pack_dataset`: TRL's `trl.data_utils.pack_dataset`, with the packing decided on the Rust core
from the Arrow list offsets and the packed columns written straight into Arrow.

TRL runs a batched `Dataset.map` (1,000 rows a batch by default) and packs each batch on its
own in Python. Here the batches' row boundaries are worked out as `map` would cut them
(`batch_size`, and the contiguous shards of `num_proc`), the core plans every batch in one call,
and each column's values are copied once into the packed order. The result is the dataset TRL
returns: same rows in the same order, same `seq_lengths`, same features and format.
"""

from __future__ import annotations

import copy
import hashlib
import operator
from typing import Any

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import _native
from .._internal.options import checked_count

STRATEGIES = ("bfd", "bfd_split", "wrapped")
INT32_MAX = 2**31 - 1

# `Dataset.map` options that cannot change what `map` returns (progress bar, caching, the
# writer's chunking, how Python outputs would be typed: TRL's function returns Arrow tables).
MAP_OPTIONS_WITHOUT_EFFECT = frozenset(
    {
        "desc",
        "load_from_cache_file",
        "keep_in_memory",
        "writer_batch_size",
        "new_fingerprint",
        "suffix_template",
        "try_original_type",
        "on_mixed_types",
    }
)
# Options that would change the result (or have `map` write a file); not reproduced.
MAP_OPTIONS_NOT_SUPPORTED = frozenset(
    {
        "cache_file_name",
        "features",
        "remove_columns",
        "input_columns",
        "with_indices",
        "with_rank",
        "drop_last_batch",
        "disable_nullable",
    }
)
# Options TRL passes to `map` itself: giving them again is a TypeError there too.
MAP_OPTIONS_SET_BY_TRL = frozenset({"function", "batched", "fn_kwargs"})


def pack_dataset(
    dataset: Any,
    seq_length: int,
    strategy: str = "bfd",
    map_kwargs: dict[str, Any] | None = None,
    *,
    whole_dataset: bool = False,
) -> Any:
    r"""Packs a dataset's sequences into rows of at most `seq_length` tokens, as TRL's
    `trl.data_utils.pack_dataset` does, with the packing decided in Rust.

    Every column must hold lists (`list` or `large_list`, all of one kind) of equal length row
    by row. Strategies:

    - `"bfd"`: best-fit decreasing; sequences longer than `seq_length` are truncated. Adds a
      `seq_lengths` column (the lengths of the sequences in each packed row).
    - `"bfd_split"`: like `"bfd"`, but long sequences are split into `seq_length`-long pieces
      (and a shorter last piece) instead of truncated.
    - `"wrapped"`: each batch's values concatenated and cut every `seq_length` values.

    Args:
        dataset: a `datasets.Dataset`, `DatasetDict`, `IterableDataset` or
            `IterableDatasetDict`. It is not changed.
        seq_length: the packed rows' length (a positive int).
        strategy: `"bfd"`, `"bfd_split"` or `"wrapped"`.
        map_kwargs: the `Dataset.map` options TRL would pass on. `batch_size` (default 1,000;
            `None` or <= 0 for one batch) and `num_proc` (its contiguous shards are batched
            apart) shape the result and are followed; `desc`, `load_from_cache_file`,
            `keep_in_memory`, `writer_batch_size`, `new_fingerprint` and the like cannot change
            it and are accepted. Others raise `NotImplementedError`. For iterable datasets they
            go to `IterableDataset.map` unchanged.
        whole_dataset: pack across the whole dataset instead of per `map` batch (fuller rows,
            ≥99.9% on realistic lengths; not TRL's result). Not for iterable datasets.

    Returns:
        The packed dataset, of the input's kind and format (`seq_lengths` added to the format's
        columns for the bfd strategies).

    Raises:
        ValueError: an unknown strategy, `seq_length` < 1, columns of different lengths in a row
            (the column and row are named), a `seq_lengths` column already there for the bfd
            strategies.
        TypeError: a column that does not hold lists, a `seq_length` that is not an int.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"Invalid packing strategy '{strategy}', must be one of {STRATEGIES}.")
    seq_length = checked_count(seq_length, "seq_length", 1)
    map_kwargs = dict(map_kwargs or {})
    if isinstance(dataset, (datasets.IterableDataset, datasets.IterableDatasetDict)):
        if whole_dataset:
            raise ValueError("whole_dataset=True needs a map-style Dataset, not an iterable one")
        return pack_iterable(dataset, seq_length, strategy, map_kwargs)
    if isinstance(dataset, datasets.DatasetDict):
        if not dataset:
            return dataset
        format = dataset_format(dataset[next(iter(dataset))], strategy)
        packed = datasets.DatasetDict(
            {
                name: pack_map_style(split, seq_length, strategy, map_kwargs, whole_dataset)
                for name, split in dataset.items()
            }
        )
        return packed.with_format(**format)
    if isinstance(dataset, datasets.Dataset):
        format = dataset_format(dataset, strategy)
        packed = pack_map_style(dataset, seq_length, strategy, map_kwargs, whole_dataset)
        if packed is dataset:  # an empty dataset, "wrapped": handed back, not to be changed
            return packed.with_format(**format)
        packed.set_format(**format)  # a dataset of its own: no deep copy as with_format makes
        return packed
    raise TypeError(
        f"pack_dataset needs a datasets.Dataset, DatasetDict, IterableDataset or "
        f"IterableDatasetDict, not {type(dataset).__name__}"
    )


def dataset_format(dataset: Any, strategy: str) -> dict[str, Any]:
    """The format to put back on the result, as TRL works it out (`_get_dataset_format`)."""
    format: dict[str, Any] = dataset.format
    format.update(format.pop("format_kwargs", {}))
    if strategy != "wrapped" and format.get("columns") is not None:
        format["columns"] = list(format["columns"]) + ["seq_lengths"]
    return format


def map_options(map_kwargs: dict[str, Any]) -> tuple[int | None, int]:
    """(batch_size, num_proc) from the `map` options; every other option is checked."""
    for key in map_kwargs:
        if key in MAP_OPTIONS_SET_BY_TRL:
            raise TypeError(f"map_kwargs cannot set {key!r}: pack_dataset passes it to map itself")
        if key in MAP_OPTIONS_NOT_SUPPORTED:
            if key in ("drop_last_batch", "disable_nullable", "with_indices", "with_rank") and (
                not map_kwargs[key]
            ):
                continue
            if map_kwargs[key] is None:
                continue
            raise NotImplementedError(
                f"map_kwargs[{key!r}] is not supported by fastcollate's pack_dataset (it would "
                f"change what TRL's map returns); use trl.data_utils.pack_dataset for it"
            )
        if key not in MAP_OPTIONS_WITHOUT_EFFECT and key not in ("batch_size", "num_proc"):
            raise TypeError(f"map_kwargs has {key!r}, which Dataset.map does not take")
    if map_kwargs.get("keep_in_memory") and map_kwargs.get("cache_file_name") is not None:
        raise ValueError("Please use either `keep_in_memory` or `cache_file_name` but not both.")
    batch_size = map_kwargs.get("batch_size", 1000)
    if batch_size is not None:
        batch_size = operator.index(batch_size)
        if batch_size <= 0:
            batch_size = None
    num_proc = map_kwargs.get("num_proc")
    num_proc = 1 if num_proc is None else operator.index(num_proc)
    if num_proc < 0:
        raise ValueError("num_proc must be >= 0 or None.")
    return batch_size, max(num_proc, 1)


def batch_bounds(rows: int, batch_size: int | None, num_proc: int) -> np.ndarray:
    """The row boundaries of `map`'s batches: `num_proc` contiguous shards (as
    `Dataset.shard(contiguous=True)` cuts them), each cut into `batch_size` rows."""
    shards = min(num_proc, rows) if rows else 1
    div, mod = divmod(rows, shards)
    bounds = [0]
    for index in range(shards):
        start = div * index + min(index, mod)
        end = start + div + (1 if index < mod else 0)
        step = batch_size if batch_size is not None else max(end - start, 1)
        bounds.extend(range(start + step, end, step))
        if end > bounds[-1]:
            bounds.append(end)
    return np.asarray(bounds, dtype=np.int64)


def pack_map_style(
    dataset: Any, seq_length: int, strategy: str, map_kwargs: dict[str, Any], whole_dataset: bool
) -> Any:
    batch_size, num_proc = map_options(map_kwargs)
    rows = len(dataset)
    if rows == 0 and strategy == "wrapped":
        return dataset  # `map` hands an empty dataset back as it is
    if getattr(dataset, "_indices", False) is None:  # no indices mapping: the table as it is
        table = dataset.data.table
    else:
        table = dataset.with_format("arrow")[:]
    bounds = np.asarray([0, rows], np.int64) if whole_dataset else None
    if bounds is None:
        bounds = batch_bounds(rows, batch_size, num_proc)
    packed = pack_table(table, seq_length, strategy, bounds, fullest_first=whole_dataset)
    info = copy.copy(dataset.info)  # Dataset() copies it in full: the features set on our own
    info.features = output_features(packed.schema, dataset.features)
    source = getattr(dataset, "_fingerprint", None)
    key = repr((source, "fastcollate.pack_dataset", seq_length, strategy, bounds.tobytes()))
    fingerprint = hashlib.sha256(key.encode()).hexdigest()[:16]
    return datasets.Dataset(packed, info=info, split=dataset.split, fingerprint=fingerprint)


def output_features(schema: Any, original: Any) -> Any:
    """The features `map` gives its output: inferred from the Arrow schema, keeping an input
    column's own feature (a `ClassLabel`, say) where its Arrow type did not change."""
    features = datasets.Features.from_arrow_schema(schema)
    fields = {field.name: field for field in original.type}
    for field in features.type:
        if field.name in fields and field == fields[field.name]:
            features[field.name] = original[field.name]
    return features


def pack_iterable(dataset: Any, seq_length: int, strategy: str, map_kwargs: dict[str, Any]) -> Any:
    """TRL's lazy `map` over an iterable dataset, each batch packed by `pack_table`."""
    first = dataset
    if isinstance(dataset, datasets.IterableDatasetDict):
        first = dataset[next(iter(dataset))]
    formatting = getattr(first, "_formatting", None)
    format: dict[str, Any] = {"type": formatting.format_type if formatting is not None else None}
    packed = dataset.with_format("arrow").map(
        pack_batch,
        batched=True,
        fn_kwargs={"seq_length": seq_length, "strategy": strategy},
        **map_kwargs,
    )
    return packed.with_format(**format)


def pack_batch(table: Any, seq_length: int, strategy: str) -> Any:
    """One `map` batch packed (for iterable datasets)."""
    return pack_table(table, seq_length, strategy, np.asarray([0, table.num_rows], np.int64))


def pack_table(
    table: Any, seq_length: int, strategy: str, bounds: np.ndarray, fullest_first: bool = False
) -> Any:
    """`table` packed batch by batch (`bounds`: the batches' row boundaries), as a `pa.Table`;
    with `fullest_first` (whole_dataset), the bfd strategies pack all rows one row at a time,
    each filled with the longest remaining sequence that fits, until none does."""
    names = table.column_names
    if not names:
        raise ValueError("pack_dataset needs at least one list column; the dataset has none")
    if strategy != "wrapped" and "seq_lengths" in names:
        raise ValueError(
            "the dataset already has a 'seq_lengths' column, which the bfd strategies add; "
            "rename or remove it first"
        )
    columns = [table.column(name) for name in names]
    lengths = row_lengths(names, columns)
    large = pa.types.is_large_list(columns[0].type)
    offset_type = pa.int64() if large else pa.int32()
    list_array = pa.LargeListArray if large else pa.ListArray

    if strategy == "wrapped":
        offsets = _native.pack_dataset_wrapped(lengths, bounds, seq_length)
        layouts: dict[bytes, tuple[Any, ...]] = {}
        packed = [
            wrapped_lists(list_array, offset_type, offsets, lengths, column, layouts)
            for column in columns
        ]
        return pa.Table.from_arrays(packed, names=names)

    split = strategy == "bfd_split"
    if fullest_first:
        plan = _native.pack_dataset_fullest(lengths, seq_length, split=split)
    else:
        plan = _native.pack_dataset_bfd(lengths, bounds, seq_length, split=split)
    starts, piece_lengths, piece_offsets, value_offsets = plan
    indices: list[Any] = []  # the take indices, built once if some column needs them
    packed = []
    for column in columns:
        values = gather(column, starts, piece_lengths, indices)
        packed.append(build_lists(list_array, offset_type, value_offsets, values))
    # TRL: list<int32> offsets, the lengths typed as the first column's list_value_length.
    seq_lengths = build_lists(
        pa.ListArray, pa.int32(), piece_offsets, pa.array(piece_lengths, type=offset_type)
    )
    return pa.Table.from_arrays([*packed, seq_lengths], names=[*names, "seq_lengths"])


def row_lengths(names: list[str], columns: list[Any]) -> np.ndarray:
    """Each row's length (a null row counts 0), after checking every column holds lists of
    one kind and the same length as the first column's in each row."""
    for name, column in zip(names, columns, strict=True):
        if not (pa.types.is_list(column.type) or pa.types.is_large_list(column.type)):
            raise TypeError(
                f"pack_dataset packs list columns only, but column '{name}' is {column.type} "
                f"(TRL raises TypeError too); remove it with dataset.remove_columns first"
            )
    first_large = pa.types.is_large_list(columns[0].type)
    lengths = None
    for name, column in zip(names, columns, strict=True):
        if pa.types.is_large_list(column.type) != first_large:
            raise ValueError(
                f"column '{name}' is {column.type} but column '{names[0]}' is "
                f"{columns[0].type}; TRL's pack_dataset needs one list kind for all columns "
                f"(cast them alike)"
            )
        these = pc.list_value_length(column)
        if column.null_count:  # a null row's length is null
            these = these.fill_null(0)
        these = these.to_numpy()
        if lengths is None:
            lengths = these.astype(np.int64, copy=False)  # the others compared as they are
            continue
        wrong = np.flatnonzero(these != lengths)
        if wrong.size:
            row = int(wrong[0])
            raise ValueError(
                f"column '{name}' has length {int(these[row])} in row {row} where column "
                f"'{names[0]}' has length {int(lengths[row])}; every column must hold values "
                f"of the same length in each row"
            )
    assert lengths is not None
    return np.ascontiguousarray(lengths)


def flattened(column: Any) -> Any:
    """A list column's values, rows concatenated (a slice, not a copy, for one chunk)."""
    chunks = [chunk.flatten() for chunk in column.chunks]
    if len(chunks) == 1:
        return chunks[0]
    if not chunks:
        return pa.array([], type=column.type.value_type)
    return pa.concat_arrays(chunks)


def fixed_width_bytes(values: Any) -> np.ndarray | None:
    """The bytes of fixed-width values without nulls (a view of the Arrow buffer), or None
    where the values are of another kind or have nulls."""
    kind = values.type
    if values.null_count or not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
        return None
    width = kind.bit_width // 8
    buffer = values.buffers()[1]
    raw = np.frombuffer(buffer, dtype=np.uint8) if buffer is not None else np.empty(0, np.uint8)
    return raw[values.offset * width : (values.offset + len(values)) * width]


def chunk_bytes(kind: Any, chunks: list[Any]) -> list[np.ndarray] | None:
    """Each chunk's bytes where the values are fixed-width (`kind`) without nulls, else None."""
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
        return None
    raws = [fixed_width_bytes(chunk) for chunk in chunks]
    return None if any(raw is None for raw in raws) else raws  # type: ignore[return-value]


def gather(column: Any, starts: np.ndarray, lengths: np.ndarray, indices: list[Any]) -> Any:
    """The pieces' values in packed order: copied by the core straight out of each chunk's
    buffer for fixed-width values without nulls (nothing concatenated first, the output
    allocated once), an Arrow `take` of the concatenated values otherwise."""
    kind = column.type.value_type
    raws = chunk_bytes(kind, [chunk.flatten() for chunk in column.chunks])
    if raws is not None:
        width = kind.bit_width // 8
        out = _native.pack_dataset_gather_chunks(starts, lengths, raws, width)
        return pa.Array.from_buffers(kind, len(out) // width, [None, pa.py_buffer(out)])
    if not indices:
        indices.append(pa.array(_native.pack_dataset_gather(starts, lengths)))
    return flattened(column).take(indices[0])


def wrapped_lists(
    list_array: Any,
    offset_type: Any,
    offsets: np.ndarray,
    lengths: np.ndarray,
    column: Any,
    layouts: dict[bytes, tuple[Any, ...]],
) -> Any:
    """A list column cut at `offsets` (into its flattened values; `lengths`: each row's number
    of values), reading the values where they lie: "wrapped" never
    reorders values, so each packed row is a contiguous range of them, and a run of rows inside
    one input chunk becomes a list array over that chunk's flattened values (no copy), its
    offsets a slice of one buffer shared by every run. Only rows that straddle chunks have
    their values copied. One output chunk per run. `layouts` keeps the runs worked out for a
    chunking, for the next column chunked alike."""
    chunks = column.chunks
    if len(offsets) == 1 or len(chunks) < 2:
        values = chunks[0].flatten() if chunks else pa.array([], type=column.type.value_type)
        return build_lists(list_array, offset_type, offsets, values)
    chunk_rows = np.zeros(len(chunks) + 1, np.int64)
    np.cumsum([len(chunk) for chunk in chunks], out=chunk_rows[1:])
    layout = layouts.get(chunk_rows.tobytes())
    if layout is None:
        layout = layouts[chunk_rows.tobytes()] = wrapped_runs(
            offsets, chunk_value_starts(lengths, chunk_rows), offset_type == pa.int32()
        )
    chunk_starts, runs, straddling, all_offsets = layout
    copied = iter(straddling_values(column, chunk_starts, offsets, straddling))
    flats = flattened_chunks(column)
    if all_offsets is None:  # int32 offsets too short for some straddling run: cut further
        parts: list[Any] = []
        for source, first, end, _ in runs:
            rebased = offsets[first : end + 1] - offsets[first]
            if source < 0:
                values = next(copied)
            else:
                start = int(offsets[first] - chunk_starts[source])
                values = flats[source].slice(start, int(rebased[-1]))
            lists = build_lists(list_array, offset_type, rebased, values)
            parts.extend(lists.chunks if isinstance(lists, pa.ChunkedArray) else [lists])
        return pa.chunked_array(parts)
    kind = (pa.list_ if offset_type == pa.int32() else pa.large_list)(column.type.value_type)
    buffers = [None, all_offsets]
    from_buffers = pa.Array.from_buffers
    # Built from the buffers, unvalidated beyond the first and last offsets: `from_arrays`
    # checking every run took as long as the rest of the run's work (the tests validate them).
    return pa.chunked_array(
        [
            from_buffers(
                kind,
                end - first,
                buffers,
                offset=position,
                children=[flats[source] if source >= 0 else next(copied)],
            )
            for source, first, end, position in runs
        ],
        type=kind,
    )


def flattened_chunks(column: Any) -> list[Any]:
    """Each list chunk's values, rows concatenated (a slice of its child where no row is null),
    from one kernel call over the column (cheaper than a `flatten()` per chunk)."""
    flats: list[Any] = pc.list_flatten(column).chunks
    if len(flats) != column.num_chunks:  # not one output chunk per input chunk: one by one
        return [chunk.flatten() for chunk in column.chunks]
    return flats


def chunk_value_starts(lengths: np.ndarray, chunk_rows: np.ndarray) -> np.ndarray:
    """Each chunk's first value in the flattened values, and the total, from the rows' lengths
    and the chunks' first rows (and the total): summed chunk by chunk, as a running sum over
    every row would write as many fresh bytes as the rows' lengths."""
    firsts = chunk_rows[:-1]
    filled = firsts < chunk_rows[1:]  # reduceat needs increasing indices: empty chunks sum 0
    counts = np.zeros(len(firsts), np.int64)
    if filled.any():
        counts[filled] = np.add.reduceat(lengths, firsts[filled])
    starts = np.zeros(len(chunk_rows), np.int64)
    np.cumsum(counts, out=starts[1:])
    return starts


def wrapped_runs(offsets: np.ndarray, chunk_starts: np.ndarray, narrow: bool) -> tuple[Any, ...]:
    """The runs of packed rows (`offsets` into the flattened values) that lie in one chunk
    (`chunk_starts`: each chunk's first value, and the total), as (chunk_starts, runs,
    straddling, offsets): each run as (its chunk, or -1 for rows that straddle chunks; first
    row; end row; its offsets' position in the fourth item); the straddling runs' (first, end)
    rows; and every run's offsets, one run after another, as one Arrow buffer (int32 where
    `narrow`; None where they do not fit): rebased to its chunk's first value for a run inside
    a chunk (the chunk's flattened values are its values), to its own first value for a
    straddling run (its values are copied)."""
    rows = len(offsets) - 1
    # Each packed row's chunk (the one holding its first value; empty chunks skipped), or -1
    # where the row runs on into the next chunk. Runs of rows with one key: the output chunks.
    # (That is `searchsorted(chunk_starts, offsets[:-1], "right") - 1`, worked out from the
    # other side: each chunk start's first row, counted up, which is cheaper.)
    firsts_at = np.searchsorted(offsets[:-1], chunk_starts, side="left")
    chunk = np.cumsum(np.bincount(firsts_at, minlength=rows + 1)[:rows]) - 1
    key = np.where(offsets[1:] <= chunk_starts[chunk + 1], chunk, -1)
    edges = np.concatenate(([0], np.flatnonzero(key[1:] != key[:-1]) + 1, [rows]))
    firsts, ends = edges[:-1], edges[1:]
    sources = key[firsts]
    bases = np.where(sources >= 0, chunk_starts[np.maximum(sources, 0)], offsets[firsts])
    counts = ends - firsts + 1
    run = np.repeat(np.arange(len(counts)), counts)
    rebased = offsets[np.arange(int(counts.sum())) - run] - np.repeat(bases, counts)
    all_offsets = None
    if not narrow:
        all_offsets = pa.py_buffer(rebased)
    elif rebased.max() <= INT32_MAX:
        all_offsets = pa.py_buffer(rebased.astype(np.int32))
    straddling = (sources < 0).nonzero()[0]
    runs = zip(
        sources.tolist(),
        firsts.tolist(),
        ends.tolist(),
        (firsts + np.arange(len(firsts))).tolist(),
        strict=True,
    )
    return (
        chunk_starts,
        list(runs),
        list(zip(firsts[straddling].tolist(), ends[straddling].tolist(), strict=True)),
        all_offsets,
    )


def straddling_values(
    column: Any, chunk_starts: np.ndarray, offsets: np.ndarray, runs: list[tuple[int, int]]
) -> list[Any]:
    """The values of each run of packed rows that straddle chunks (`runs`: (first, end) rows),
    copied out of the chunks they lie in (the column's chunks, starting at `chunk_starts` in the
    flattened values): fixed-width values without nulls by the core in one call, others by
    `pa.concat_arrays`."""
    if not runs:
        return []
    pieces: list[list[tuple[int, int, int]]] = []  # per run: (chunk, start, stop)
    for first, end in runs:
        start, stop = int(offsets[first]), int(offsets[end])
        first_chunk = int(np.searchsorted(chunk_starts, start, side="right")) - 1
        last_chunk = int(np.searchsorted(chunk_starts, stop, side="left")) - 1
        run = []
        for index in range(first_chunk, last_chunk + 1):
            low, high = int(chunk_starts[index]), int(chunk_starts[index + 1])
            if high > low:
                run.append((index, max(start, low), min(stop, high)))
        pieces.append(run)
    involved = sorted({index for run in pieces for index, _, _ in run})
    flats = {index: column.chunks[index].flatten() for index in involved}
    kind = column.type.value_type
    raws = chunk_bytes(kind, [flats[index] for index in involved])
    if raws is None:
        return [
            pa.concat_arrays(
                [flats[index].slice(a - int(chunk_starts[index]), b - a) for index, a, b in run]
            )
            for run in pieces
        ]
    # The involved chunks, one after another, are the values the core reads from.
    at, shifts = 0, {}
    for index in involved:
        shifts[index] = at - int(chunk_starts[index])
        at += len(flats[index])
    starts = np.asarray([a + shifts[index] for run in pieces for index, a, _ in run], np.int64)
    lengths = np.asarray([b - a for run in pieces for _, a, b in run], np.int64)
    width = kind.bit_width // 8
    out = _native.pack_dataset_gather_chunks(starts, lengths, raws, width)
    values = pa.Array.from_buffers(kind, len(out) // width, [None, pa.py_buffer(out)])
    copied, at = [], 0
    for first, end in runs:
        count = int(offsets[end] - offsets[first])
        copied.append(values.slice(at, count))
        at += count
    return copied


def build_lists(list_array: Any, offset_type: Any, offsets: np.ndarray, values: Any) -> Any:
    """A list array of `values` cut at `offsets`; chunked where int32 offsets would
    overflow (TRL's per-batch arrays never reach that)."""
    if offset_type == pa.int64() or int(offsets[-1]) <= INT32_MAX:
        return list_array.from_arrays(pa.array(offsets, type=offset_type), values)
    chunks = []
    first = 0
    while first < len(offsets) - 1:
        limit = int(offsets[first]) + INT32_MAX
        last = int(np.searchsorted(offsets, limit, side="right")) - 1
        last = max(last, first + 1)
        base = int(offsets[first])
        part = values.slice(base, int(offsets[last]) - base)
        rebased = pa.array(offsets[first : last + 1] - base, type=offset_type)
        chunks.append(list_array.from_arrays(rebased, part))
        first = last
    return pa.chunked_array(chunks)
