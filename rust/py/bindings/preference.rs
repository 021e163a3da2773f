//! Binding for the preference collators' prompt + completion padding: reads the prompt and
//! completion columns of the rows (the reader's strict route, else its lax route in the same
//! call), joins, cuts and pads them with the interpreter released
//! (`core::preference`), and hands the matrices to numpy without copying.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyList, PyString, PyTuple};

use crate::core::column::{Column, Kind, Shape};
use crate::core::error::CollateError;
use crate::core::pad::DType;
use crate::core::preference::{
    kept, pad_joined, pad_joined_with, write_copy, JoinOptions, JoinedBatch, Lengths, Part,
    Sequences,
};
use crate::py::convert::reader::{Reader, Scalars, Values};
use crate::py::output::numpy_arrays::{matrix, vector};

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
        values: column.fitting_ints()?,
        offsets: &column.offsets,
    })
}

/// The batches read straight from the rows into the padded matrices, with no columns in
/// between, when every row is an exact dict whose values under `keys` (the prompt key first
/// when `has_prompt`) are exact lists or tuples of exact ints in the int64 range. None gives
/// the batch to the general path (which reports what is wrong, in row order); nothing here
/// runs Python code, so giving up changes nothing.
fn strict_batches(
    reader: &Reader<'_>,
    keys: &[String],
    has_prompt: bool,
    together: bool,
    options: &JoinOptions,
) -> Option<Vec<JoinedBatch>> {
    let rows = reader.rows()?;
    let py = rows.first()?.py();
    let mut values: Vec<Values<'_>> = Vec::with_capacity(keys.len());
    let mut lengths: Vec<Vec<usize>> = Vec::with_capacity(keys.len());
    for key in keys {
        let key_values = reader.values(&PyString::new(py, key))?;
        lengths.push(key_values.token_lengths()?);
        values.push(key_values);
    }
    let total = lengths
        .iter()
        .flatten()
        .fold(0usize, |total, &length| total.saturating_add(length));
    // Nothing but empty sequences has no element type yet: left to the general path.
    if total == 0 {
        return None;
    }
    let no_prompt = vec![0usize; rows.len()];
    let (prompt_lengths, completion_lengths) = if has_prompt {
        let (first, rest) = lengths.split_first()?;
        (first.as_slice(), rest)
    } else {
        (no_prompt.as_slice(), lengths.as_slice())
    };
    let completion_values = &values[usize::from(has_prompt)..];
    let prompt = Lengths {
        key: "prompt",
        lengths: prompt_lengths,
    };
    let sets: Vec<Lengths<'_>> = completion_lengths
        .iter()
        .zip(&keys[usize::from(has_prompt)..])
        .map(|(lengths, key)| Lengths { key, lengths })
        .collect();
    let prompt_values = if has_prompt { values.first() } else { None };
    // `first_set`: the index in `completion_values` of the call's first set.
    let write = |first_set: usize| {
        move |part: Part, row: usize, start: usize, place: &mut [std::mem::MaybeUninit<i64>]| {
            let column = match part {
                Part::Prompt if place.is_empty() => return true,
                Part::Prompt => prompt_values,
                Part::Completion(index) => completion_values.get(first_set.saturating_add(index)),
            };
            column.is_some_and(|column| column.write_row_from(row, start, place))
        }
    };
    if together {
        let batch = pad_joined_with(prompt, &sets, options, write(0)).ok()??;
        Some(vec![batch])
    } else {
        // The first set's batch holds every row's prompt (or the part of it the cut keeps):
        // the later sets copy it from there instead of reading the Python ints again.
        let mut batches: Vec<JoinedBatch> = Vec::with_capacity(sets.len());
        for set in 0..sets.len() {
            let read = write(set);
            let first = batches.first().zip(sets.first());
            let batch = pad_joined_with(
                prompt,
                &sets[set..=set],
                options,
                |part, row, start, place| {
                    let copied = match (part, first) {
                        (Part::Prompt, Some((batch, lengths))) => kept_prompt(
                            batch,
                            prompt_lengths,
                            lengths.lengths,
                            options,
                            row,
                            start,
                            place.len(),
                        ),
                        _ => None,
                    };
                    match copied {
                        Some(values) => {
                            write_copy(place, values);
                            true
                        }
                        None => read(part, row, start, place),
                    }
                },
            )
            .ok()??;
            batches.push(batch);
        }
        Some(batches)
    }
}

/// The prompt tokens `start..start + length` of `row` as `batch` (one set padded alone, whose
/// rows were cut with `options`) holds them; None when its cut dropped some of them.
fn kept_prompt<'a>(
    batch: &'a JoinedBatch,
    prompt_lengths: &[usize],
    completion_lengths: &[usize],
    options: &JoinOptions,
    row: usize,
    start: usize,
    length: usize,
) -> Option<&'a [i64]> {
    let (held, _) = kept(
        *prompt_lengths.get(row)?,
        *completion_lengths.get(row)?,
        options,
    );
    let end = start.checked_add(length)?;
    if start < held.start || end > held.end {
        return None;
    }
    let first = row
        .checked_mul(batch.width)?
        .checked_add(start - held.start)?;
    batch.input_ids.get(first..first.checked_add(length)?)
}

/// The dtype of a scalar column (`scalars`): only float32 and bool columns are read here.
fn scalar_dtype(key: String, dtype: DType) -> PyResult<(String, DType)> {
    match dtype {
        DType::F32 | DType::Bool => Ok((key, dtype)),
        other => Err(PyValueError::new_err(format!(
            "unknown scalar kind '{}': expected 'float32' or 'bool'",
            other.name()
        ))),
    }
}

/// Every row's `prompt_key` (none: an empty prompt) joined to its value under each of `completion_keys`, cut to
/// `max_length` (from the end with `keep_end`) and padded right with `pad_id`: a list of
/// `(input_ids, attention_mask, completion_mask)` int64 matrices, one for all the keys padded
/// together (`together`, rows in key order) or one per key; the completion mask is None
/// unless `completion_mask`. The usual batch takes the reader's strict route (see `strict_batches`),
/// any other its lax route, in the same call.
///
/// `scalars`, `(key, kind)` pairs (kind "float32" or "bool"), adds one item per pair after the
/// matrices: every row's `key` as a 1-d array of that kind, or None where a row is not an
/// exact dict holding an exact value of that kind (the caller then reads that column itself).
/// The last item says whether the strict route read the rows (`read_strictly`: every token
/// value an exact list or tuple of ints, so the caller need not check the rows itself).
#[pyfunction]
#[pyo3(signature = (features, prompt_key, completion_keys, *, together, pad_id, multiple, max_length, keep_end, completion_mask = true, scalars = None))]
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
    scalars: Option<Vec<(String, DType)>>,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let scalars = scalars
        .unwrap_or_default()
        .into_iter()
        .map(|(key, dtype)| scalar_dtype(key, dtype))
        .collect::<PyResult<Vec<_>>>()?;
    // The rows taken once: a list the caller passed is copied (its items, not their values),
    // so Python code that runs later in the call (an allocation's `__del__`) cannot add or
    // remove a row between the padded keys and the scalar columns.
    let snapshot;
    let features = match features.cast_exact::<PyList>() {
        Ok(list) => {
            snapshot = PyList::new(py, list.iter())?.into_any();
            &snapshot
        }
        Err(_) => features,
    };
    let mut keys: Vec<String> = prompt_key.iter().cloned().collect();
    keys.extend(completion_keys);
    let options = JoinOptions {
        pad_id,
        multiple,
        max_length,
        keep_end,
        completion_mask,
    };
    let reader = Reader::new(features);
    let strict = strict_batches(&reader, &keys, prompt_key.is_some(), together, &options);
    let read_strictly = strict.is_some();
    let batches = match strict {
        Some(batches) => batches,
        None => gathered_and_padded(py, &reader, prompt_key.is_some(), &keys, together, &options)?,
    };
    let mut out = batches
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
        .collect::<PyResult<Vec<_>>>()?;
    for (key, dtype) in scalars.iter() {
        let column = reader
            .values(&PyString::new(py, key))
            .and_then(|values| values.scalars(*dtype));
        out.push(match column {
            Some(Scalars::F32(floats)) => vector(py, floats)?.into_any(),
            Some(Scalars::Bool(bools)) => vector(py, bools)?.into_any(),
            None => py.None().into_bound(py),
        });
    }
    out.push(PyBool::new(py, read_strictly).to_owned().into_any());
    Ok(out)
}

/// The general path: the keys read into columns (which names a bad row), then joined and
/// padded with the interpreter released.
fn gathered_and_padded(
    py: Python<'_>,
    reader: &Reader<'_>,
    has_prompt: bool,
    keys: &[String],
    together: bool,
    options: &JoinOptions,
) -> PyResult<Vec<JoinedBatch>> {
    let columns: Vec<Column> = reader.lax(keys)?;
    let views = columns
        .iter()
        .map(sequences)
        .collect::<PyResult<Vec<_>>>()?;
    // Without a prompt key every row's prompt is empty.
    let rows = views.first().map_or(0, Sequences::rows);
    let no_offsets = vec![0usize; rows + 1];
    let (prompts, completions) = if has_prompt {
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
    let batches: Vec<JoinedBatch> = py.detach(|| {
        if together {
            pad_joined(prompts, completions, options).map(|b| vec![b])
        } else {
            completions
                .iter()
                .map(|set| pad_joined(prompts, std::slice::from_ref(set), options))
                .collect()
        }
    })?;
    Ok(batches)
}
