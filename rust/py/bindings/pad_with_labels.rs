//! Binding for TRL's padded SFT batch: `input_ids` and `labels` written once into their padded
//! int64 buffers, the attention mask (and position ids) beside them, each handed to the
//! caller's tensor conversion. The usual batch takes the reader's strict route, straight from
//! the rows; any other its lax route (`Reader::lax`), in the same call, which names the key and
//! row of a bad value. Giving up on the strict route runs no Python code, so it changes nothing.

use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::core::column::Shape;
use crate::core::error::CollateError;
use crate::core::flatten::split_rows;
use crate::core::pad::{self, Data, Layout, Output, Strategy};

use crate::py::bindings::flatten::{
    any_labels, first_non_integer_row, not_integers, with_labels_from_ids,
};
use crate::py::convert::reader::{OptionalValues, Reader, Values};
use crate::py::output::numpy_arrays::matrix;
use crate::py::output::torch_tensors;

/// The usual batch as the reader's strict route takes it: a non-empty exact list or tuple of
/// exact dicts, each with `input_ids` a non-empty exact list or tuple, and `labels` (where
/// present) one of the same length; with `position_ids`, a first row without `seq_lengths`
/// (pre-packed rows count their positions otherwise). The values themselves are checked while
/// they are written.
fn usual_rows<'py>(
    features: &Bound<'py, PyAny>,
    position_ids: bool,
) -> Option<(Values<'py>, OptionalValues<'py>, Vec<usize>)> {
    let py = features.py();
    let reader = Reader::new(features);
    let first = reader.rows()?.first()?;
    if position_ids && first.contains(intern!(py, "seq_lengths")).unwrap_or(true) {
        return None;
    }
    let ids = reader.values(intern!(py, "input_ids"))?;
    let lengths = ids.token_lengths()?;
    if lengths.contains(&0) {
        return None; // the lax route decides what an empty row is
    }
    let labels = reader.optional_values(intern!(py, "labels"))?;
    let label_lengths = labels.values.token_lengths_where(&labels.present)?;
    let fits = label_lengths
        .iter()
        .zip(&lengths)
        .all(|(labels, ids)| labels.is_none_or(|length| length == *ids));
    fits.then_some((ids, labels, lengths))
}

/// The strict route's buffers of the batch: input ids, labels, position ids (when asked),
/// attention mask; None when a value is not an exact int in the int64 range, or the batch
/// cannot be padded (the lax route then reports either).
fn written(
    ids: &Values<'_>,
    labels: &OptionalValues<'_>,
    lengths: &[usize],
    pad_id: i64,
    multiple: Option<usize>,
    position_ids: bool,
) -> Option<(usize, Vec<Vec<i64>>)> {
    let target = pad::target_length("input_ids", lengths, Strategy::Longest, multiple).ok()??;
    let input_ids = ids
        .padded("input_ids", lengths, target, pad_id, false)
        .ok()??;
    // A row without labels takes its input ids (TRL's `example.get("labels", input_ids)`).
    let labels = pad::fill_in_place(
        "labels",
        lengths,
        target,
        -100,
        false,
        |row, out| match labels.present.get(row) {
            Some(true) => labels.values.append_row(row, out, lengths[row]),
            Some(false) => {
                let start = row.checked_mul(target);
                let ids = start.and_then(|s| input_ids.get(s..s.checked_add(lengths[row])?));
                ids.map(|ids| out.extend_from_slice(ids)).is_some()
            }
            None => false,
        },
    )
    .ok()??;
    let mut buffers = vec![input_ids, labels];
    if position_ids {
        buffers.push(pad::position_ids("position_ids", lengths, target).ok()?);
    }
    buffers.push(pad::attention_mask("attention_mask", lengths, target, false).ok()?);
    Some((target, buffers))
}

/// The lax route: the rows (a row without `labels` taking its `input_ids`, when any row has
/// labels) gathered into core columns by the reader's `lax`, which reads every kind of value
/// and names a bad one; then floats, bools and single numbers refused naming their row, labels
/// of another length than the row's input ids refused, and (with position ids of pre-packed
/// rows, `seq_lengths` in the first row) each row's `seq_lengths` checked to be at least 1 and
/// to add up to the row. The buffers are `written`'s.
fn lax_written(
    features: &Bound<'_, PyAny>,
    pad_id: i64,
    multiple: Option<usize>,
    position_ids: bool,
) -> PyResult<(usize, usize, Vec<Vec<i64>>)> {
    let py = features.py();
    let Some(first) = features.try_iter()?.next() else {
        return Err(CollateError::EmptyBatch.into());
    };
    let packed = position_ids && first?.contains(intern!(py, "seq_lengths"))?;
    let has_labels = any_labels(features)?;
    let rows = if has_labels {
        with_labels_from_ids(features)?
    } else {
        features.clone()
    };
    let mut keys = vec!["input_ids".to_string()];
    if has_labels {
        keys.push("labels".to_string());
    }
    if packed {
        keys.push("seq_lengths".to_string());
    }
    let columns = Reader::new(&rows).lax(&keys)?;
    for column in &columns {
        if column.shape == Some(Shape::Scalar) {
            return Err(PyValueError::new_err(format!(
                "'{}' in row 0 is a single number; the collator needs a sequence in every row",
                column.key
            )));
        }
        if not_integers(column) {
            let row = first_non_integer_row(&rows, &column.key)?;
            let key = column.key.clone();
            return Err(CollateError::NotIntegers { key, row }.into());
        }
    }
    let mut columns = columns.into_iter();
    let ids = columns.next().ok_or(CollateError::EmptyBatch)?;
    let labels = if has_labels { columns.next() } else { None };
    let sequences = if packed { columns.next() } else { None };
    let lengths = ids.lengths();
    if lengths.is_empty() {
        return Err(CollateError::EmptyBatch.into());
    }
    if let Some(labels) = &labels {
        for (row, (&length, &main_length)) in labels.lengths().iter().zip(&lengths).enumerate() {
            if length != main_length {
                return Err(CollateError::LengthMismatch {
                    key: "labels".to_string(),
                    row,
                    length,
                    main_key: "input_ids".to_string(),
                    main_length,
                }
                .into());
            }
        }
    }
    let target = pad::target_length("input_ids", &lengths, Strategy::Longest, multiple)?
        .ok_or(CollateError::EmptyBatch)?;
    let offsets = &ids.offsets;
    // Row `row`'s values of a column whose rows are as long as the input ids' (`offsets`).
    let padded = |key: &str, values: &[i64], pad_value: i64| -> PyResult<Vec<i64>> {
        let filled = pad::fill_in_place(key, &lengths, target, pad_value, false, |row, out| {
            let span = offsets.get(row).zip(offsets.get(row + 1));
            match span.and_then(|(&start, &end)| values.get(start..end)) {
                Some(row_values) => {
                    out.extend_from_slice(row_values);
                    true
                }
                None => false,
            }
        })?;
        filled.ok_or_else(|| PyValueError::new_err(format!("'{key}': a row was not written")))
    };
    let id_values = ids.fitting_ints()?;
    let mut buffers = vec![padded("input_ids", id_values, pad_id)?];
    // Without labels in any row, each row's labels are its input ids (TRL's default).
    let label_values = match &labels {
        Some(column) => column.fitting_ints()?,
        None => id_values,
    };
    buffers.push(padded("labels", label_values, -100)?);
    if position_ids {
        buffers.push(match sequences {
            None => pad::position_ids("position_ids", &lengths, target)?,
            Some(column) => {
                // Position ids restart at 0 at every sequence, laid end to end over the rows.
                let sequence_lengths = split_rows(column, &lengths, "input_ids")?;
                let mut positions = Vec::with_capacity(id_values.len());
                for length in sequence_lengths {
                    positions.extend((0..length).map(|position| position as i64));
                }
                padded("position_ids", &positions, 0)?
            }
        });
    }
    buffers.push(pad::attention_mask(
        "attention_mask",
        &lengths,
        target,
        false,
    )?);
    Ok((lengths.len(), target, buffers))
}

/// TRL's padded SFT batch: `(batch, read_strictly)`, the batch a dict of `input_ids` (padded
/// right with `pad_id`), `labels` (each row's, else its input ids; padded with -100),
/// `position_ids` (with `position_ids`; pre-packed rows, `seq_lengths` in the first row,
/// restart them at every sequence), `attention_mask`, every one a `rows × width` int64 matrix
/// passed through `to_tensor` (e.g. `torch.from_numpy`), the width the longest row's length
/// rounded up to `multiple`. The usual rows (see `usual_rows`) take the reader's strict route,
/// any other its lax route (see `lax_written`), in the same call; `read_strictly` says which
/// (when true, every value was a list or tuple of ints, so int64 is the rows' own dtype).
/// Rows read by the lax route come back as int64 numpy matrices, not passed through
/// `to_tensor`, for the caller to cast to the rows' own dtypes first.
#[pyfunction]
#[pyo3(signature = (features, *, pad_id, multiple, position_ids, to_tensor))]
pub fn pad_with_labels<'py>(
    py: Python<'py>,
    features: &Bound<'py, PyAny>,
    pad_id: i64,
    multiple: Option<usize>,
    position_ids: bool,
    to_tensor: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyTuple>> {
    let strict = usual_rows(features, position_ids).and_then(|(ids, labels, lengths)| {
        let (width, buffers) = written(&ids, &labels, &lengths, pad_id, multiple, position_ids)?;
        Some((lengths.len(), width, buffers))
    });
    let read_strictly = strict.is_some();
    let (rows, width, buffers) = match strict {
        Some(written) => written,
        None => lax_written(features, pad_id, multiple, position_ids)?,
    };
    let mut keys = vec![intern!(py, "input_ids"), intern!(py, "labels")];
    if position_ids {
        keys.push(intern!(py, "position_ids"));
    }
    keys.push(intern!(py, "attention_mask"));
    let batch = PyDict::new(py);
    let direct = torch_tensors::is_torch_from_numpy(to_tensor);
    for (key, values) in keys.into_iter().zip(buffers) {
        if !read_strictly {
            // For the caller to cast to the rows' dtypes before any torch call.
            batch.set_item(key, matrix(py, rows, width, values)?)?;
            continue;
        }
        let output = Output {
            key: String::new(),
            data: Data::I64(values),
            layout: Layout::Matrix {
                rows,
                columns: width,
            },
        };
        batch.set_item(
            key,
            torch_tensors::converted(py, output, to_tensor, direct)?,
        )?;
    }
    PyTuple::new(
        py,
        [
            batch.into_any(),
            read_strictly.into_pyobject(py)?.to_owned().into_any(),
        ],
    )
}
