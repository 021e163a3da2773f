//! Binding for the flattening collator: reads `input_ids` (and `labels`) once, packs them with
//! the interpreter released, and hands the packed buffers to numpy without copying.

use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use super::gather::{gather, KeepRaw};
use super::rows::BatchKeys;
use crate::core::column::{Column, Kind};
use crate::core::error::CollateError;
use crate::core::flatten::{flatten as pack, EmptyRows, FlattenOptions};

fn one_row<'py, T: numpy::Element>(py: Python<'py>, values: Vec<T>) -> PyResult<Bound<'py, PyAny>> {
    let columns = values.len();
    Ok(Array2::from_shape_vec((1, columns), values)
        .map_err(|e| PyValueError::new_err(e.to_string()))?
        .into_pyarray(py)
        .into_any())
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

/// Packs a batch into one row (with `seq_lengths`, pre-packed rows: each row's `seq_lengths`
/// are its sequences): returns a dict with `input_ids`, `labels` (shape `(1, total)`,
/// int64), and when asked `position_ids` (int64), `seq_idx` (int32, `(1, total)`),
/// `cu_seq_lens` (int32, `(rows + 1,)`) and `max_length` (an int).
#[pyfunction]
#[pyo3(signature = (
    features, *, labels, separator_id, position_ids_start, position_ids, seq_idx, cu_seq_lens,
    integers_only=false, skip_empty=false, drop_empty=false, seq_lengths=false
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
) -> PyResult<Bound<'py, PyDict>> {
    let mut keys = vec!["input_ids".to_string()];
    if labels {
        keys.push("labels".to_string());
    }
    if seq_lengths {
        keys.push("seq_lengths".to_string());
    }
    // Listed as padded keys so that a value that is not numbers is an error, not kept raw.
    let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let only_keys = BatchKeys::named(py, keys.clone());
    let (_, gathered) = gather(features, &key_refs, Some(only_keys), KeepRaw::default())?;
    // Floats would be truncated toward zero (transformers' collator does that); TRL's refuses.
    if integers_only {
        if let Some(g) = gathered.iter().find(|g| not_integers(&g.column)) {
            let key = g.column.key.clone();
            let row = first_non_integer_row(features, &key)?;
            return Err(CollateError::NotIntegers { key, row }.into());
        }
    }
    let mut columns = gathered.into_iter().map(|g| g.column);
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
        result.set_item("cu_seq_lens", PyArray1::from_vec(py, values))?;
        result.set_item("max_length", packed.max_length)?;
    }
    Ok(result)
}
