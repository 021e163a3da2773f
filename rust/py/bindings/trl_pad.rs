//! Binding for TRL's `pad` of token-id lists (`fastcollate.trl.pad_with_mask`): a list of
//! lists or tuples of ints written straight into the padded int64 matrix, with its attention
//! mask, without a dict per row or a column in between (the reader's strict route).

use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use crate::core::pad;
use crate::py::convert::reader::Values;
use crate::py::output::numpy_arrays::matrix;

/// `(input_ids, attention_mask)`: `sequences` (exact lists or tuples of exact ints) padded
/// with `pad_id` to the longest, rounded up to `multiple`, on the left when `left`, as int64
/// matrices. None when a sequence is anything else (or every one is empty): the caller's
/// general path then pads them or names the bad row. Nothing here runs Python code.
#[pyfunction]
#[pyo3(signature = (sequences, *, pad_id, multiple, left))]
pub fn pad_sequences<'py>(
    py: Python<'py>,
    sequences: &Bound<'py, PyAny>,
    pad_id: i64,
    multiple: Option<usize>,
    left: bool,
) -> PyResult<Option<(Bound<'py, PyAny>, Bound<'py, PyAny>)>> {
    let items: Vec<Bound<'py, PyAny>> = if let Ok(list) = sequences.cast_exact::<PyList>() {
        list.iter().collect()
    } else if let Ok(tuple) = sequences.cast_exact::<PyTuple>() {
        tuple.iter().collect()
    } else {
        return Ok(None);
    };
    let values = Values::of(items);
    let Some(lengths) = values.token_lengths() else {
        return Ok(None);
    };
    let longest = lengths.iter().copied().max().unwrap_or(0);
    if longest == 0 {
        return Ok(None);
    }
    let target = pad::round_up(longest, multiple)?;
    let key = "sequences";
    let Some(ids) = values.padded(key, &lengths, target, pad_id, left)? else {
        return Ok(None);
    };
    let mask = pad::attention_mask(key, &lengths, target, left)?;
    let rows = lengths.len();
    Ok(Some((
        matrix(py, rows, target, ids)?,
        matrix(py, rows, target, mask)?,
    )))
}
