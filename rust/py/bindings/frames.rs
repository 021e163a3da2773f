//! Binding for feature-extractor padding (`fastcollate.collators.feature_extraction`): numpy
//! float rows (raw audio, or frames × features) read in place and padded by the core into a
//! new buffer, handed back to numpy without a copy.
//!
//! The rows are memory Python can move (`ndarray.resize(..., refcheck=False)` frees it, from
//! another thread too), so they are read the way every raw read is (docs/design.md, "Every raw
//! read"): every row checked first (type, dtype, shape, contiguity: C-level state of the array
//! object, no Python code), then the slices taken and copied into the padded buffer with the
//! interpreter held and nothing in between that could run Python; no numpy borrow is held
//! (its release would have to find the array where it was).

use numpy::{PyArrayDyn, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::core::frames::{self, FloatRow, FrameOptions};
use crate::core::pad::Strategy;
use crate::py::output::numpy_arrays::owned_array;

/// A row's numpy array, of one of two float dtypes (not yet read).
enum FloatArray<'py> {
    F32(Bound<'py, PyArrayDyn<f32>>),
    F64(Bound<'py, PyArrayDyn<f64>>),
}

/// What a row the binding cannot read in place is told (the Python side hands it over as a
/// C-contiguous, aligned copy).
const NOT_CONTIGUOUS: &str = "the array is not C-contiguous and aligned";

fn row_error(key: &str, row: usize, what: &str) -> PyErr {
    PyTypeError::new_err(format!("'{key}' in row {row}: {what}"))
}

fn float_array<'py>(key: &str, row: usize, value: Bound<'py, PyAny>) -> PyResult<FloatArray<'py>> {
    let value = match value.cast_into::<PyArrayDyn<f32>>() {
        Ok(array) => return Ok(FloatArray::F32(array)),
        Err(err) => err.into_inner(),
    };
    if let Ok(array) = value.cast_into::<PyArrayDyn<f64>>() {
        return Ok(FloatArray::F64(array));
    }
    Err(row_error(
        key,
        row,
        "expected a float32 or float64 numpy array",
    ))
}

/// `(values, attention_mask)`: `rows` (C-contiguous, aligned float32 / float64 numpy arrays of `ndim`
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
    // Every row's array and shape first (no Python code runs: C-level state only).
    let mut arrays = Vec::with_capacity(rows.len());
    let mut row_frames = Vec::with_capacity(rows.len());
    let mut width: Option<usize> = None;
    for (row, value) in rows.iter().enumerate() {
        let array = float_array(key, row, value)?;
        let (shape, contiguous) = match &array {
            FloatArray::F32(a) => (a.shape().to_vec(), a.is_c_contiguous() && a.is_aligned()),
            FloatArray::F64(a) => (a.shape().to_vec(), a.is_c_contiguous() && a.is_aligned()),
        };
        if shape.len() != ndim {
            return Err(PyValueError::new_err(format!(
                "'{key}' in row {row}: expected {ndim} dimension(s), got {}",
                shape.len()
            )));
        }
        if !contiguous {
            return Err(row_error(key, row, NOT_CONTIGUOUS));
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
        arrays.push(array);
    }
    let width = width.unwrap_or(1);
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
    // The values and the mask together, before either is reserved (C-level state only: the
    // given masks' dtype is read from their array objects).
    let mask = if attention_mask {
        Some(match masks.and_then(|masks| masks.iter().next()) {
            Some(first) if first.cast::<numpy::PyArray1<i64>>().is_ok() => {
                ("attention_mask", 8, "int64")
            }
            _ => ("attention_mask", 4, "int32"),
        })
    } else {
        None
    };
    frames::check_outputs(key, &layout, width, mask)?;
    // Then the slices and the copy, attached, with nothing in between that runs Python code.
    let mut sources = Vec::with_capacity(arrays.len());
    for (row, array) in arrays.iter().enumerate() {
        // SAFETY: each array was checked above to be C-contiguous of its dtype, and no Python
        // code runs from here until `pad_frames` returns (the interpreter stays attached), so
        // no one can resize or free it while its slice lives; the list holds the arrays.
        let slice = unsafe {
            match array {
                FloatArray::F32(a) => a.as_slice().map(FloatRow::F32),
                FloatArray::F64(a) => a.as_slice().map(FloatRow::F64),
            }
        };
        sources.push(slice.map_err(|_| row_error(key, row, NOT_CONTIGUOUS))?);
    }
    let values = frames::pad_frames(key, &sources, width, &layout, padding_value);
    drop(sources);
    let values = values?;
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
            let mask = frames::frame_mask("attention_mask", &layout)?;
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
        // Every mask's array and length first (C-level state, no Python code), then the
        // slices and the copy with nothing in between, as for the rows.
        let mut arrays = Vec::with_capacity(masks.len());
        for (row, value) in masks.iter().enumerate() {
            let Ok(array) = value.cast_into::<numpy::PyArray1<T>>() else {
                return Ok(None);
            };
            if !(array.is_c_contiguous() && array.is_aligned()) {
                return Err(row_error("attention_mask", row, NOT_CONTIGUOUS));
            }
            if Some(&array.len()) != row_frames.get(row) {
                return Err(PyValueError::new_err(format!(
                    "'attention_mask' in row {row}: {} values for {} frames",
                    array.len(),
                    row_frames.get(row).copied().unwrap_or(0)
                )));
            }
            arrays.push(array);
        }
        let mut slices: Vec<&[T]> = Vec::with_capacity(arrays.len());
        for (row, array) in arrays.iter().enumerate() {
            // SAFETY: checked C-contiguous above; no Python code runs until the padding
            // below returns (attached), so nothing can move the array while it is read.
            let slice = unsafe { array.as_slice() }
                .map_err(|_| row_error("attention_mask", row, NOT_CONTIGUOUS))?;
            slices.push(slice);
        }
        let mask = frames::pad_frames("attention_mask", &slices, 1, layout, T::default());
        drop(slices);
        let mask = mask?;
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
