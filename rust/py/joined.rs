//! Binding for the preference collators' prompt + completion padding: reads the prompt and
//! completion columns of the rows once, joins, cuts and pads them with the interpreter released
//! (`core::joined`), and hands the matrices to numpy without copying.

use numpy::ndarray::Array2;
use numpy::IntoPyArray;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use super::gather::gather;
use super::rows::BatchKeys;
use crate::core::column::{Column, Kind, Shape};
use crate::core::error::CollateError;
use crate::core::joined::{pad_joined, JoinOptions, JoinedBatch, Sequences};

fn matrix<'py>(
    py: Python<'py>,
    rows: usize,
    width: usize,
    values: Vec<i64>,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(Array2::from_shape_vec((rows, width), values)
        .map_err(|e| PyValueError::new_err(e.to_string()))?
        .into_pyarray(py)
        .into_any())
}

fn sequences(column: &Column) -> PyResult<Sequences<'_>> {
    // Floats, bools and scalars are refused here; the Python side then finds the row.
    if matches!(column.kind, Some(Kind::Float) | Some(Kind::Bool)) {
        return Err(CollateError::NotIntegers {
            key: column.key.clone(),
            row: 0,
        }
        .into());
    }
    if column.shape == Some(Shape::Scalar) {
        return Err(PyTypeError::new_err(format!(
            "'{}' holds single numbers; it must hold lists of token ids",
            column.key
        )));
    }
    Ok(Sequences {
        key: &column.key,
        values: &column.ints,
        offsets: &column.offsets,
    })
}

/// Every row's `prompt_key` (none: an empty prompt) joined to its value under each of `completion_keys`, cut to
/// `max_length` (from the end with `keep_end`) and padded right with `pad_id`: a list of
/// `(input_ids, attention_mask, completion_mask)` int64 matrices, one for all the keys padded
/// together (`together`, rows in key order) or one per key; the completion mask is None
/// unless `completion_mask`.
#[pyfunction]
#[pyo3(signature = (features, prompt_key, completion_keys, *, together, pad_id, multiple, max_length, keep_end, completion_mask = true))]
#[allow(clippy::too_many_arguments)]
pub fn pad_prompt_completion<'py>(
    py: Python<'py>,
    features: &Bound<'py, PyAny>,
    prompt_key: Option<String>,
    completion_keys: Vec<String>,
    together: bool,
    pad_id: i64,
    multiple: Option<usize>,
    max_length: Option<usize>,
    keep_end: bool,
    completion_mask: bool,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let mut keys: Vec<String> = prompt_key.iter().cloned().collect();
    keys.extend(completion_keys);
    let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let (_, gathered) = gather(
        features,
        &key_refs,
        Some(BatchKeys::named(py, keys.clone())),
        false,
    )?;
    let columns: Vec<Column> = gathered.into_iter().map(|g| g.column).collect();
    let views = columns
        .iter()
        .map(sequences)
        .collect::<PyResult<Vec<_>>>()?;
    // Without a prompt key every row's prompt is empty.
    let rows = views.first().map_or(0, Sequences::rows);
    let no_offsets = vec![0usize; rows + 1];
    let (prompts, completions) = if prompt_key.is_some() {
        let (prompts, completions) = views
            .split_first()
            .ok_or_else(|| PyErr::from(CollateError::EmptyBatch))?;
        (*prompts, completions)
    } else {
        let empty = Sequences {
            key: "prompt",
            values: &[],
            offsets: &no_offsets,
        };
        (empty, views.as_slice())
    };
    let options = JoinOptions {
        pad_id,
        multiple,
        max_length,
        keep_end,
        completion_mask,
    };
    let batches: Vec<JoinedBatch> = py.detach(|| {
        if together {
            pad_joined(prompts, completions, &options).map(|b| vec![b])
        } else {
            completions
                .iter()
                .map(|set| pad_joined(prompts, std::slice::from_ref(set), &options))
                .collect()
        }
    })?;
    batches
        .into_iter()
        .map(|b| {
            let items = [
                matrix(py, b.rows, b.width, b.input_ids)?,
                matrix(py, b.rows, b.width, b.attention_mask)?,
                if completion_mask {
                    matrix(py, b.rows, b.width, b.completion_mask)?
                } else {
                    py.None().into_bound(py)
                },
            ];
            Ok(PyTuple::new(py, items)?.into_any())
        })
        .collect()
}
