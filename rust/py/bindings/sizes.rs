//! Binding for the one sizing rule (`core::sizes`): the Python side asks it before it makes an
//! array whose size it computed from options, so that Python and Rust refuse the same sizes
//! with the same error.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::core::sizes;

/// Raises, before anything is allocated, for an output `key` of `shape` with elements of
/// `itemsize` bytes named `dtype`: `MemoryError` past this machine's memory, `ValueError` past
/// the address space (a dimension that is negative or does not fit in a machine integer
/// included).
#[pyfunction]
#[pyo3(signature = (key, shape, itemsize, dtype))]
pub fn check_output_size(
    key: &str,
    shape: Vec<Bound<'_, PyAny>>,
    itemsize: usize,
    dtype: &str,
) -> PyResult<()> {
    let dims: Option<Vec<usize>> = shape.iter().map(|d| d.extract::<usize>().ok()).collect();
    let Some(dims) = dims else {
        let text: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
        return Err(PyValueError::new_err(format!(
            "'{key}' would be an array of shape ({}), more than memory can address; check \
             max_length and pad_to_multiple_of",
            text.join(", ")
        )));
    };
    sizes::checked_output(key, &dims, itemsize, dtype)?;
    Ok(())
}
