//! Binding for the flattening collator: reads `input_ids` (and `labels`) once, packs them with
//! the interpreter released, and hands the packed buffers to numpy without copying.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use crate::core::column::{Column, Kind, Shape};
use crate::core::error::CollateError;
use crate::core::flatten::{flatten as pack, EmptyRows, FlattenOptions};
use crate::core::pad;
use crate::py::convert::gather::{gather, KeepRaw};
use crate::py::convert::ints;
use crate::py::convert::rows::BatchKeys;
use crate::py::convert::value_kind::exact_sequence;
use crate::py::output::numpy_arrays::{matrix, vector};

fn one_row<T>(py: Python<'_>, values: Vec<T>) -> PyResult<Bound<'_, PyAny>>
where
    T: numpy::Element + Copy + for<'a> IntoPyObject<'a>,
{
    let columns = values.len();
    matrix(py, 1, columns, values)
}

fn not_integers(column: &Column) -> bool {
    matches!(column.kind, Some(Kind::Float) | Some(Kind::Bool))
}

/// The first row whose `key` holds a float, or only bools (read again row by row: a column
/// keeps no record of which row promoted it). Only reached when the batch has such a row.
fn first_non_integer_row(features: &Bound<'_, PyAny>, key: &str) -> PyResult<usize> {
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

/// The columns `gather` would read for `keys`, read straight from the rows into their final
/// int64 buffers (sized once, written once): only for the usual batch, a list of exact dicts
/// whose every value under `keys` is a non-empty exact list or tuple of exact ints in the
/// int64 range. None for anything else (and, with `no_labels`, when a row holds `labels`,
/// which the caller did not find in the first row), leaving the batch to `gather`, which then
/// reads it again and reports what is wrong, as it would have. Giving up runs no Python code
/// and changes nothing.
fn columns_in_place(
    features: &Bound<'_, PyAny>,
    keys: &[String],
    no_labels: bool,
) -> Option<Vec<Column>> {
    let py = features.py();
    let rows = features.cast_exact::<PyList>().ok()?;
    let rows: Vec<Bound<'_, PyDict>> = rows
        .iter()
        .map(|row| row.cast_exact::<PyDict>().ok().cloned())
        .collect::<Option<_>>()?;
    if rows.is_empty() {
        return None;
    }
    if no_labels {
        let labels = PyString::intern(py, "labels");
        if rows.iter().any(|row| row.contains(&labels).unwrap_or(true)) {
            return None;
        }
    }
    let mut columns = Vec::with_capacity(keys.len());
    for key in keys {
        let py_key = PyString::new(py, key);
        let mut values = Vec::with_capacity(rows.len());
        let mut offsets = Vec::new();
        offsets.try_reserve_exact(rows.len() + 1).ok()?;
        offsets.push(0usize);
        for row in &rows {
            let value = row.get_item(&py_key).ok()??;
            let (length, is_list) = exact_sequence(&value)?;
            if length == 0 {
                return None; // the general path decides what an empty row is
            }
            offsets.push(offsets.last()?.checked_add(length)?);
            values.push((value, is_list));
        }
        let mut ints = Vec::new();
        ints.try_reserve_exact(*offsets.last()?).ok()?;
        for ((value, is_list), w) in values.iter().zip(offsets.windows(2)) {
            let length = w[1] - w[0];
            let appended = pad::append_to_vec(&mut ints, length, |slots| {
                ints::append_exact_ints(value, *is_list, slots, length)
            });
            if !appended {
                return None;
            }
        }
        let mut column = Column::new(key.as_str());
        column.kind = Some(Kind::Int);
        column.shape = Some(Shape::Sequence);
        column.ints = ints;
        column.offsets = offsets;
        columns.push(column);
    }
    Some(columns)
}

/// Packs a batch into one row (with `seq_lengths`, pre-packed rows: each row's `seq_lengths`
/// are its sequences): returns a dict with `input_ids`, `labels` (shape `(1, total)`,
/// int64), and when asked `position_ids` (int64), `seq_idx` (int32, `(1, total)`),
/// `cu_seq_lens` (int32, `(rows + 1,)`) and `max_length` (an int). The usual batch is read in
/// place (see `columns_in_place`); with `in_place_only`, any other batch gives None instead of
/// going through `gather`, and so does one where some row holds `labels` though `labels` is
/// false (the caller looked at the first row only).
#[pyfunction]
#[pyo3(signature = (
    features, *, labels, separator_id, position_ids_start, position_ids, seq_idx, cu_seq_lens,
    integers_only=false, skip_empty=false, drop_empty=false, seq_lengths=false,
    in_place_only=false
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
    in_place_only: bool,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let mut keys = vec!["input_ids".to_string()];
    if labels {
        keys.push("labels".to_string());
    }
    if seq_lengths {
        keys.push("seq_lengths".to_string());
    }
    let columns = match columns_in_place(features, &keys, in_place_only && !labels) {
        Some(columns) => columns,
        None if in_place_only => return Ok(None),
        None => gathered_columns(features, &keys, integers_only)?,
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
    Ok(Some(result))
}

/// The general path: `keys` read by `gather` (listed as padded keys, so that a value that is
/// not numbers is an error naming its row, not kept raw). With `integers_only`, a column of
/// floats or bools is an error naming the first such row (transformers' collator truncates
/// floats toward zero; TRL's refuses them).
fn gathered_columns(
    features: &Bound<'_, PyAny>,
    keys: &[String],
    integers_only: bool,
) -> PyResult<Vec<Column>> {
    let py = features.py();
    let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let only_keys = BatchKeys::named(py, keys.to_vec());
    let (_, gathered) = gather(features, &key_refs, Some(only_keys), KeepRaw::default())?;
    if integers_only {
        if let Some(g) = gathered.iter().find(|g| not_integers(&g.column)) {
            let key = g.column.key.clone();
            let row = first_non_integer_row(features, &key)?;
            return Err(CollateError::NotIntegers { key, row }.into());
        }
    }
    Ok(gathered.into_iter().map(|g| g.column).collect())
}
