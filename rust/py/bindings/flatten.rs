//! Binding for the flattening collator and TRL's padding-free batch: reads `input_ids` (and
//! `labels`, `seq_lengths`) by the reader's strict route, or its lax route in the same call,
//! packs them with the interpreter released, and hands the packed buffers to numpy without
//! copying.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use crate::core::column::{Column, Kind, Shape};
use crate::core::error::CollateError;
use crate::core::flatten::{flatten as pack, EmptyRows, FlattenOptions};
use crate::py::convert::gather::{gather, BatchKeys, KeepRaw};
use crate::py::convert::reader::{Reader, Values};
use crate::py::output::numpy_arrays::{matrix, vector};

fn one_row<T>(py: Python<'_>, values: Vec<T>) -> PyResult<Bound<'_, PyAny>>
where
    T: numpy::Element + Copy + for<'a> IntoPyObject<'a>,
{
    let columns = values.len();
    matrix(py, 1, columns, values)
}

pub(crate) fn not_integers(column: &Column) -> bool {
    matches!(column.kind, Some(Kind::Float) | Some(Kind::Bool))
}

/// The first row whose `key` holds a float, or only bools (read again row by row: a column
/// keeps no record of which row promoted it). Only reached when the batch has such a row.
pub(crate) fn first_non_integer_row(features: &Bound<'_, PyAny>, key: &str) -> PyResult<usize> {
    let py = features.py();
    for (row, feature) in features.try_iter()?.enumerate() {
        let one = PyList::new(py, [feature?])?;
        let only = BatchKeys::named(py, vec![key.to_string()]);
        let (_, gathered) = gather(&one, &[key], Some(only), KeepRaw::default())?;
        if gathered.iter().any(|g| not_integers(&g.column)) {
            return Ok(row);
        }
    }
    Ok(0)
}

/// The columns `gather` would read for `keys`, through the reader's strict route: straight
/// from the rows into their final int64 buffers (sized once, written once), only for the usual
/// batch, a list of exact dicts whose every value under `keys` is a non-empty exact list or
/// tuple of exact ints in the int64 range (with `labels_from_ids`, a row without `labels` takes
/// its `input_ids`, the first key). None for anything else, leaving the batch to the lax route,
/// which then reads it again and reports what is wrong, as it would have. Giving up runs no
/// Python code and changes nothing.
fn strict_columns(
    reader: &Reader<'_>,
    keys: &[String],
    labels_from_ids: bool,
) -> Option<Vec<Column>> {
    let rows = reader.rows()?;
    let py = rows.first()?.py();
    let mut columns = Vec::with_capacity(keys.len());
    let mut read: Vec<Values<'_>> = Vec::with_capacity(keys.len());
    for key in keys {
        let py_key = PyString::new(py, key);
        let values = match read.first() {
            Some(ids) if labels_from_ids && key == "labels" => {
                reader.optional_values(&py_key)?.or_from(ids)
            }
            _ => reader.values(&py_key)?,
        };
        let lengths = values.token_lengths()?;
        if lengths.contains(&0) {
            return None; // the general path decides what an empty row is
        }
        let ints = values.concatenated(&lengths)?;
        let mut offsets = Vec::new();
        offsets.try_reserve_exact(rows.len() + 1).ok()?;
        offsets.push(0usize);
        for length in lengths {
            offsets.push(offsets.last()? + length);
        }
        let mut column = Column::new(key.as_str());
        column.kind = Some(Kind::Int);
        column.shape = Some(Shape::Sequence);
        column.ints = ints;
        column.offsets = offsets;
        columns.push(column);
        read.push(values);
    }
    Some(columns)
}

/// Whether any row holds `labels` (`"labels" in row`, in row order).
pub(crate) fn any_labels(features: &Bound<'_, PyAny>) -> PyResult<bool> {
    let labels = intern!(features.py(), "labels");
    for row in features.try_iter()? {
        if row?.contains(labels)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The rows for the lax route with TRL's labels: each row without `labels` (but with
/// `input_ids`) replaced by a new dict of its items and `labels` set to its `input_ids`, as
/// `{**row, "labels": row["input_ids"]}` makes it; the others as they are.
pub(crate) fn with_labels_from_ids<'py>(
    features: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = features.py();
    let labels = intern!(py, "labels");
    let ids = intern!(py, "input_ids");
    let rows = PyList::empty(py);
    for row in features.try_iter()? {
        let row = row?;
        if row.contains(labels)? || !row.contains(ids)? {
            rows.append(row)?;
            continue;
        }
        let copy = PyDict::new(py);
        copy.call_method1("update", (&row,))?;
        copy.set_item(labels, row.get_item(ids)?)?;
        rows.append(copy)?;
    }
    Ok(rows.into_any())
}

/// Packs a batch into one row (with `seq_lengths`, pre-packed rows: each row's `seq_lengths`
/// are its sequences): returns a dict with `input_ids`, `labels` (shape `(1, total)`,
/// int64), and when asked `position_ids` (int64), `seq_idx` (int32, `(1, total)`),
/// `cu_seq_lens` (int32, `(rows + 1,)`) and `max_length` (an int), and `read_strictly`
/// (whether the reader's strict route read the rows: every value an exact list or tuple of
/// ints, so int64 is the rows' own dtype). The usual batch takes the strict route (see
/// `strict_columns`), any other the lax one, in the same call. With `labels_from_ids` (TRL's
/// rule), `labels` is whether any row holds labels, and a row without them takes its input
/// ids.
#[pyfunction]
#[pyo3(signature = (
    features, *, labels, separator_id, position_ids_start, position_ids, seq_idx, cu_seq_lens,
    integers_only=false, skip_empty=false, drop_empty=false, seq_lengths=false,
    labels_from_ids=false
))]
#[allow(clippy::too_many_arguments)]
pub fn flatten_batch<'py>(
    py: Python<'py>,
    features: &Bound<'py, PyAny>,
    labels: bool,
    separator_id: i64,
    position_ids_start: i64,
    position_ids: bool,
    seq_idx: bool,
    cu_seq_lens: bool,
    integers_only: bool,
    skip_empty: bool,
    drop_empty: bool,
    seq_lengths: bool,
    labels_from_ids: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let labels = if labels_from_ids {
        any_labels(features)?
    } else {
        labels
    };
    let mut keys = vec!["input_ids".to_string()];
    if labels {
        keys.push("labels".to_string());
    }
    if seq_lengths {
        keys.push("seq_lengths".to_string());
    }
    let reader = Reader::new(features);
    let strict = strict_columns(&reader, &keys, labels_from_ids && labels);
    let read_strictly = strict.is_some();
    let columns = match strict {
        Some(columns) => columns,
        None if labels_from_ids && labels => {
            let rows = with_labels_from_ids(features)?;
            gathered_columns(&Reader::new(&rows), &rows, &keys, integers_only)?
        }
        None => gathered_columns(&reader, features, &keys, integers_only)?,
    };
    let mut columns = columns.into_iter();
    let input_ids = columns
        .next()
        .ok_or_else(|| PyErr::from(CollateError::EmptyBatch))?;
    let label_column = if labels { columns.next() } else { None };
    let sequence_lengths = columns.next();
    let options = FlattenOptions {
        separator_id,
        position_ids_start,
        position_ids,
        seq_idx,
        cu_seq_lens,
        empty_rows: if drop_empty {
            EmptyRows::Drop
        } else if skip_empty {
            EmptyRows::Skip
        } else {
            EmptyRows::Reject
        },
    };
    let packed = py.detach(|| pack(input_ids, label_column, sequence_lengths, &options))?;

    let result = PyDict::new(py);
    result.set_item("input_ids", one_row(py, packed.input_ids)?)?;
    result.set_item("labels", one_row(py, packed.labels)?)?;
    if let Some(values) = packed.position_ids {
        result.set_item("position_ids", one_row(py, values)?)?;
    }
    if let Some(values) = packed.seq_idx {
        result.set_item("seq_idx", one_row(py, values)?)?;
    }
    if let Some(values) = packed.cu_seq_lens {
        result.set_item("cu_seq_lens", vector(py, values)?)?;
        result.set_item("max_length", packed.max_length)?;
    }
    result.set_item("read_strictly", read_strictly)?;
    Ok(result)
}

/// The lax route: `keys` read by the reader's `lax` (padded keys, so that a value that is not
/// numbers is an error naming its row, not kept raw). With `integers_only`, a column of floats
/// or bools is an error naming the first such row (transformers' collator truncates floats
/// toward zero; TRL's refuses them).
fn gathered_columns(
    reader: &Reader<'_>,
    features: &Bound<'_, PyAny>,
    keys: &[String],
    integers_only: bool,
) -> PyResult<Vec<Column>> {
    let columns = reader.lax(keys)?;
    if integers_only {
        if let Some(column) = columns.iter().find(|column| not_integers(column)) {
            let key = column.key.clone();
            let row = first_non_integer_row(features, &key)?;
            return Err(CollateError::NotIntegers { key, row }.into());
        }
    }
    Ok(columns)
}
