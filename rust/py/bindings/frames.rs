//! Binding for feature-extractor padding (`fastcollate.collators.feature_extraction`): numpy
//! float rows (raw audio, or frames × features) read as borrowed slices, padded by the core
//! with the interpreter released, handed back to numpy without a copy.

use numpy::{PyArrayDyn, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::core::frames::{self, FloatRow, FrameOptions};
use crate::core::pad::Strategy;
use crate::py::output::numpy_arrays::owned_array;

/// The numpy arrays of `rows`, each of `ndim` dimensions, as borrowed arrays of one of two
/// float dtypes; an error naming `key` and the row for anything else.
enum Borrowed<'py> {
    F32(numpy::PyReadonlyArrayDyn<'py, f32>),
    F64(numpy::PyReadonlyArrayDyn<'py, f64>),
}

fn row_error(key: &str, row: usize, what: &str) -> PyErr {
    PyTypeError::new_err(format!("'{key}' in row {row}: {what}"))
}

fn borrow_row<'py>(key: &str, row: usize, value: &Bound<'py, PyAny>) -> PyResult<Borrowed<'py>> {
    if let Ok(array) = value.cast::<PyArrayDyn<f32>>() {
        return Ok(Borrowed::F32(array.try_readonly().map_err(|_| {
            row_error(key, row, "the array is being written elsewhere")
        })?));
    }
    if let Ok(array) = value.cast::<PyArrayDyn<f64>>() {
        return Ok(Borrowed::F64(array.try_readonly().map_err(|_| {
            row_error(key, row, "the array is being written elsewhere")
        })?));
    }
    Err(row_error(
        key,
        row,
        "expected a float32 or float64 numpy array",
    ))
}

/// `(values, attention_mask)`: `rows` (C-contiguous float32 / float64 numpy arrays of `ndim`
/// dimensions, frames along the first) padded as a sequence feature extractor pads them, as a
/// float32 array of `rows × frames` (`ndim` 1) or `rows × frames × features` (`ndim` 2). The
/// mask is None unless `attention_mask`: then the given `masks` (1-d int32 or int64 arrays,
/// one per row, of its row's length) padded with 0 in their dtype, or, without them, an int32
/// mask of ones and zeros.
#[pyfunction]
#[pyo3(signature = (key, rows, *, ndim, strategy, max_length, pad_to_multiple_of, truncation, left, padding_value, attention_mask, masks=None))]
#[allow(clippy::too_many_arguments)]
pub fn pad_frames<'py>(
    py: Python<'py>,
    key: &str,
    rows: &Bound<'py, PyList>,
    ndim: usize,
    strategy: &str,
    max_length: Option<usize>,
    pad_to_multiple_of: Option<usize>,
    truncation: bool,
    left: bool,
    padding_value: f32,
    attention_mask: bool,
    masks: Option<&Bound<'py, PyList>>,
) -> PyResult<(Bound<'py, PyAny>, Option<Bound<'py, PyAny>>)> {
    if ndim != 1 && ndim != 2 {
        return Err(PyValueError::new_err("rows have one or two dimensions"));
    }
    let mut borrowed = Vec::with_capacity(rows.len());
    let mut row_frames = Vec::with_capacity(rows.len());
    let mut width: Option<usize> = None;
    for (row, value) in rows.iter().enumerate() {
        let array = borrow_row(key, row, &value)?;
        let shape = match &array {
            Borrowed::F32(a) => a.shape().to_vec(),
            Borrowed::F64(a) => a.shape().to_vec(),
        };
        if shape.len() != ndim {
            return Err(PyValueError::new_err(format!(
                "'{key}' in row {row}: expected {ndim} dimension(s), got {}",
                shape.len()
            )));
        }
        let row_width = if ndim == 2 { shape[1] } else { 1 };
        match width {
            None => width = Some(row_width),
            Some(w) if w != row_width => {
                return Err(PyValueError::new_err(format!(
                    "'{key}' in row {row}: {row_width} features a frame, row 0 has {w}"
                )))
            }
            Some(_) => {}
        }
        row_frames.push(shape[0]);
        borrowed.push(array);
    }
    let width = width.unwrap_or(1);
    let mut sources = Vec::with_capacity(borrowed.len());
    for (row, array) in borrowed.iter().enumerate() {
        let slice = match array {
            Borrowed::F32(a) => a.as_slice().map(FloatRow::F32),
            Borrowed::F64(a) => a.as_slice().map(FloatRow::F64),
        };
        sources.push(slice.map_err(|_| row_error(key, row, "the array is not C-contiguous"))?);
    }
    let options = FrameOptions {
        strategy: Strategy::parse(strategy, max_length)?,
        pad_to_multiple_of,
        truncate_to: if truncation {
            Some(
                max_length
                    .ok_or_else(|| PyValueError::new_err("truncation=True needs a max_length"))?,
            )
        } else {
            None
        },
        left,
    };
    let layout = frames::frame_layout(key, &row_frames, width, &options)?;
    let values = py.detach(|| frames::pad_frames(key, &sources, width, &layout, padding_value))?;
    let batch = row_frames.len();
    let values = if ndim == 1 {
        owned_array(py, values, &[batch, layout.frames])?
    } else {
        owned_array(py, values, &[batch, layout.frames, width])?
    };
    if !attention_mask {
        return Ok((values, None));
    }
    let mask = match masks {
        None => {
            let mask = py.detach(|| frames::frame_mask("attention_mask", &layout))?;
            owned_array(py, mask, &[batch, layout.frames])?
        }
        Some(masks) => given_masks(py, masks, &row_frames, &layout)?,
    };
    Ok((values, Some(mask)))
}

/// The rows' own attention masks (1-d int32 or int64 arrays of one dtype, each as long as its
/// row), truncated and padded with 0 like the values.
fn given_masks<'py>(
    py: Python<'py>,
    masks: &Bound<'py, PyList>,
    row_frames: &[usize],
    layout: &frames::FrameLayout,
) -> PyResult<Bound<'py, PyAny>> {
    fn read<'py, T: numpy::Element + Copy + Default + Send + Sync>(
        py: Python<'py>,
        masks: &Bound<'py, PyList>,
        row_frames: &[usize],
        layout: &frames::FrameLayout,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let mut arrays = Vec::with_capacity(masks.len());
        for value in masks.iter() {
            let Ok(array) = value.cast::<numpy::PyArray1<T>>() else {
                return Ok(None);
            };
            arrays.push(array.try_readonly().map_err(|_| {
                PyValueError::new_err("'attention_mask': an array is being written elsewhere")
            })?);
        }
        let mut slices: Vec<&[T]> = Vec::with_capacity(arrays.len());
        for (row, array) in arrays.iter().enumerate() {
            let slice = array
                .as_slice()
                .map_err(|_| row_error("attention_mask", row, "the array is not C-contiguous"))?;
            if Some(&slice.len()) != row_frames.get(row) {
                return Err(PyValueError::new_err(format!(
                    "'attention_mask' in row {row}: {} values for {} frames",
                    slice.len(),
                    row_frames.get(row).copied().unwrap_or(0)
                )));
            }
            slices.push(slice);
        }
        let mask =
            py.detach(|| frames::pad_frames("attention_mask", &slices, 1, layout, T::default()))?;
        Ok(Some(owned_array(
            py,
            mask,
            &[row_frames.len(), layout.frames],
        )?))
    }
    if masks.len() != row_frames.len() {
        return Err(PyValueError::new_err(format!(
            "{} attention masks for {} rows",
            masks.len(),
            row_frames.len()
        )));
    }
    if let Some(mask) = read::<i64>(py, masks, row_frames, layout)? {
        return Ok(mask);
    }
    if let Some(mask) = read::<i32>(py, masks, row_frames, layout)? {
        return Ok(mask);
    }
    Err(PyTypeError::new_err(
        "'attention_mask': expected 1-d int32 or int64 arrays of one dtype",
    ))
}
